package egress

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// BenchmarkTunnel measures bulk throughput of an allowed CONNECT tunnel:
// client → relay (loopback TCP) → Unix socket → forward proxy → destination
// (a loopback echo), 1 MiB each way per operation, against the same echo
// reached directly.
func BenchmarkTunnel(b *testing.B) {
	echo := echoServer(b, "tcp", "127.0.0.1:0")
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	run := func(b *testing.B, dial func() net.Conn) {
		b.SetBytes(int64(2 * len(payload)))
		buf := make([]byte, len(payload))
		c := dial()
		defer c.Close()
		b.ResetTimer()
		for b.Loop() {
			go c.Write(payload)
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() net.Conn {
			c, err := net.Dial("tcp", echo.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return c
		})
	})
	b.Run("relay+proxy", func(b *testing.B) {
		h := startHarness(b, Config{Allow: []string{"echo.example.com:7"}, Resolver: newResolver(map[string][]netip.Addr{"echo.example.com.": {pubA}})})
		h.dial.Route("93.184.215.14:7", echo.Addr().String())
		run(b, func() net.Conn {
			c, err := net.Dial("tcp", h.forward)
			if err != nil {
				b.Fatal(err)
			}
			io.WriteString(c, "CONNECT echo.example.com:7 HTTP/1.1\r\nHost: echo.example.com:7\r\n\r\n")
			resp := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
			if _, err := io.ReadFull(c, resp); err != nil || !strings.Contains(string(resp), " 200 ") {
				b.Fatalf("CONNECT: %q %v", resp, err)
			}
			return c
		})
	})
}

// BenchmarkUpstreamRequest measures one small model-API request (keep-alive
// client) through relay → Unix socket → upstream reverse proxy (decision,
// key injection) → loopback server, against the server reached directly.
func BenchmarkUpstreamRequest(b *testing.B) {
	api := newRecordingServer(b)
	h := startHarness(b, Config{Upstreams: []Upstream{{URL: api.URL, Header: "x-api-key", Key: realKey}}, AllowLoopbackUpstreams: true})
	run := func(b *testing.B, base string) {
		client := &http.Client{Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		for b.Loop() {
			req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"m"}`))
			req.Header.Set("X-Api-Key", dummyKey)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, api.URL) })
	b.Run("relay+proxy", func(b *testing.B) { run(b, "http://"+h.upstream[0]) })
}
