package githubtest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// openAPIFixture is the part of GitHub's published OpenAPI description the
// fake serves (testdata/PROVENANCE.md says where it comes from; a test
// regenerates and compares it).
const openAPIFixture = "openapi.json"

//go:embed testdata/openapi.json
var openAPIJSON []byte

var (
	specOnce sync.Once
	specDoc  *openapi3.T
	specErr  error
)

// spec loads the embedded description once.
func spec() (*openapi3.T, error) {
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(openAPIJSON)
		if specErr != nil {
			specErr = fmt.Errorf("githubtest: %s: %w", openAPIFixture, specErr)
		}
	})
	return specDoc, specErr
}

// specRoute returns the description's route of rt.
func specRoute(rt route) (*routers.Route, error) {
	doc, err := spec()
	if err != nil {
		return nil, err
	}
	item := doc.Paths.Value(rt.path)
	if item == nil {
		return nil, fmt.Errorf("githubtest: the description has no path %s", rt.path)
	}
	op := item.GetOperation(rt.method)
	if op == nil || op.OperationID != rt.op {
		return nil, fmt.Errorf("githubtest: the description has no %s %s (%s)", rt.method, rt.path, rt.op)
	}
	return &routers.Route{Spec: doc, Path: rt.path, PathItem: item, Method: rt.method, Operation: op}, nil
}

// validationOptions: every request and response is checked in full,
// formats (date-time, uri …) included; authentication is the fake's own
// business (handle).
func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		MultiError:              true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
	}
}

// validateRequest checks r — its path parameters, query and body — against
// the route's operation. body is r's body, already read.
func validateRequest(ctx context.Context, rt *routers.Route, r *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	params := map[string]string{}
	for _, p := range pathParams(rt.Path) {
		params[p] = r.PathValue(p)
	}
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt, Options: validationOptions()}
	return in, openapi3filter.ValidateRequest(ctx, in)
}

// validateResponse checks an answer against the operation's response for
// its status (statuses the description does not list pass: GitHub answers
// 5xx and rate limits on any route).
func validateResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: validationOptions(),
	})
}

// pathParams lists the {names} of a description path.
func pathParams(path string) []string {
	var out []string
	for _, part := range strings.Split(path, "/") {
		if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") {
			out = append(out, part[1:len(part)-1])
		}
	}
	return out
}

// example returns a fresh copy of the description's example answer of op
// for status (the first example by name), or nil when it has none. For a
// list the first element is returned: the fake answers each item from it.
func example(op string, status int) map[string]any {
	doc, err := spec()
	if err != nil {
		return nil
	}
	for _, item := range doc.Paths.Map() {
		o := findOperation(item, op)
		if o == nil {
			continue
		}
		resp := o.Responses.Status(status)
		if resp == nil || resp.Value == nil {
			return nil
		}
		mt := resp.Value.Content.Get("application/json")
		if mt == nil {
			return nil
		}
		var v any = mt.Example
		if v == nil && len(mt.Examples) > 0 {
			names := make([]string, 0, len(mt.Examples))
			for n := range mt.Examples {
				names = append(names, n)
			}
			sort.Strings(names)
			if ex := mt.Examples[names[0]]; ex != nil && ex.Value != nil {
				v = ex.Value.Value
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			return nil
		}
		if list, ok := out.([]any); ok {
			if len(list) == 0 {
				return nil
			}
			out = list[0]
		}
		m, _ := out.(map[string]any)
		return m
	}
	return nil
}

// findOperation returns the operation of item whose operationId is op.
func findOperation(item *openapi3.PathItem, op string) *openapi3.Operation {
	for _, o := range item.Operations() {
		if o.OperationID == op {
			return o
		}
	}
	return nil
}

// fromExample is op's example answer for status with the fake's own values
// laid over it (merge), so every answer has all the fields GitHub's have,
// and the fake's state where it matters.
func fromExample(op string, status int, own map[string]any) map[string]any {
	base := example(op, status)
	if base == nil {
		return own
	}
	return merge(base, own)
}

// merge lays over onto base: maps are merged key by key, anything else
// (nil included) replaces.
func merge(base, over map[string]any) map[string]any {
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = merge(bm, om)
				continue
			}
		}
		base[k] = v
	}
	return base
}

// specProblem is one request or answer that did not match the description.
type specProblem struct {
	op, what string
	err      error
}

func (p specProblem) String() string {
	return fmt.Sprintf("%s: the %s does not match GitHub's OpenAPI description: %s", p.op, p.what, brief(p.err))
}

// brief says what is wrong in err in one line per mismatch: where (a JSON
// pointer) and why, without the schema dumps kin-openapi adds.
func brief(err error) string {
	var out []string
	var walk func(err error)
	walk = func(err error) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, x := range e {
				walk(x)
			}
		case *openapi3filter.RequestError:
			what := "request"
			if e.Parameter != nil {
				what = e.Parameter.In + " parameter " + e.Parameter.Name
			} else if e.RequestBody != nil {
				what = "body"
			}
			if e.Err != nil {
				n := len(out)
				walk(e.Err)
				for i := n; i < len(out); i++ {
					out[i] = what + ": " + out[i]
				}
				return
			}
			out = append(out, what+": "+e.Reason)
		case *openapi3filter.ResponseError:
			if e.Err != nil {
				walk(e.Err)
				return
			}
			out = append(out, e.Reason)
		case *openapi3.SchemaError:
			if me, ok := e.Origin.(openapi3.MultiError); ok {
				walk(me)
				return
			}
			out = append(out, "/"+strings.Join(e.JSONPointer(), "/")+": "+e.Reason)
		default:
			out = append(out, err.Error())
		}
	}
	walk(err)
	return strings.Join(out, "; ")
}
