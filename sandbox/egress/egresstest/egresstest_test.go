package egresstest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
)

func TestResolver(t *testing.T) {
	r := NewResolver(map[string][]netip.Addr{"a.test": {PublicV4}, "b.test.": {PublicV6}})
	tests := []struct {
		name, host string
		want       []netip.Addr
		notFound   bool
	}{
		{"key without dot, asked with", "a.test.", []netip.Addr{PublicV4}, false},
		{"key with dot, asked without", "b.test", []netip.Addr{PublicV6}, false},
		{"unknown name", "c.test.", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.LookupNetIP(context.Background(), "ip", tt.host)
			var de *net.DNSError
			if tt.notFound != (errors.As(err, &de) && de.IsNotFound) || !slices.Equal(got, tt.want) {
				t.Errorf("LookupNetIP(%q) = %v, %v", tt.host, got, err)
			}
		})
	}
	r.Set("a.test.", netip.MustParseAddr("127.0.0.1"))
	if got, _ := r.LookupNetIP(context.Background(), "ip", "a.test."); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("127.0.0.1")}) {
		t.Errorf("after Set: %v", got)
	}
	if _, err := r.LookupNetIP(context.Background(), "ip4", "a.test."); err == nil {
		t.Error("network ip4 accepted")
	}
	if got := r.Asked(); len(got) != 5 || got[0] != "a.test." {
		t.Errorf("Asked() = %q", got)
	}
}

func TestRouter(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hi")
			c.Close()
		}
	}()
	r := NewRouter()
	r.Route("93.184.215.14:443", l.Addr().String())
	tests := []struct {
		name, addr string
		ok         bool
	}{
		{"routed public address", "93.184.215.14:443", true},
		{"unrouted public address", "151.101.1.1:443", false},
		{"loopback passes through", l.Addr().String(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := r.DialContext(context.Background(), "tcp", tt.addr)
			if (err == nil) != tt.ok {
				t.Fatalf("DialContext(%s) = %v", tt.addr, err)
			}
			if c != nil {
				b, _ := io.ReadAll(c)
				c.Close()
				if string(b) != "hi" {
					t.Errorf("read %q", b)
				}
			}
		})
	}
	if got := r.Dialed(); len(got) != 3 || got[1] != "151.101.1.1:443" {
		t.Errorf("Dialed() = %q", got)
	}
}
