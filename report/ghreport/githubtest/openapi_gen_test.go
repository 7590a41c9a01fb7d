package githubtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateOpenAPI = flag.Bool("update-openapi", false, "regenerate "+openAPIFixture+" from GitHub's OpenAPI description named by "+openAPISourceEnv)

// openAPISourceEnv names the file the fixture is generated from: GitHub's
// published description of api.github.com as npm's @octokit/openapi ships
// it (generated/api.github.com.json). .ci/run installs the package and
// sets it.
const openAPISourceEnv = "GOALRUN_OCTOKIT_OPENAPI"

// TestOpenAPIFixture keeps testdata/openapi.json equal to what
// subsetOpenAPI makes from GitHub's description: with -update-openapi it
// rewrites the fixture; otherwise, when GOALRUN_OCTOKIT_OPENAPI names the
// description (CI), it fails on any difference, so the fixture is never
// edited by hand and follows the pinned package.
func TestOpenAPIFixture(t *testing.T) {
	src := os.Getenv(openAPISourceEnv)
	if src == "" {
		if *updateOpenAPI || os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: it must name @octokit/openapi's generated/api.github.com.json (.ci/run sets it)", openAPISourceEnv)
		}
		t.Skipf("%s is not set; the fixture is checked against GitHub's description in CI", openAPISourceEnv)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := subsetOpenAPI(raw, Operations())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", openAPIFixture)
	if *updateOpenAPI {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the subset of %s (regenerate: go test ./report/ghreport/githubtest -run TestOpenAPIFixture -update-openapi)", path, src)
	}
}

// subsetOpenAPI returns the part of GitHub's OpenAPI description (raw) that
// the operations ops need: their paths and methods, every component they
// refer to (transitively), the examples included; descriptions, summaries
// and x-github metadata (text for people) dropped. The output is indented
// JSON with sorted keys, so regenerating it gives the same bytes.
func subsetOpenAPI(raw []byte, ops []string) ([]byte, error) {
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("the description is not JSON: %w", err)
	}
	paths, _ := spec["paths"].(map[string]any)
	components, _ := spec["components"].(map[string]any)
	want := map[string]bool{}
	for _, op := range ops {
		want[op] = true
	}
	outPaths := map[string]any{}
	for p, item := range paths {
		item, _ := item.(map[string]any)
		for method, op := range item {
			o, ok := op.(map[string]any)
			if !ok || !want[fmt.Sprint(o["operationId"])] {
				continue
			}
			delete(want, fmt.Sprint(o["operationId"]))
			dst, _ := outPaths[p].(map[string]any)
			if dst == nil {
				dst = map[string]any{}
				if params, ok := item["parameters"]; ok {
					dst["parameters"] = params
				}
				outPaths[p] = dst
			}
			dst[method] = o
		}
	}
	if len(want) > 0 {
		var missing []string
		for op := range want {
			missing = append(missing, op)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("the description has no operation %s", strings.Join(missing, ", "))
	}
	outComp := map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#/components/") {
				parts := strings.SplitN(strings.TrimPrefix(ref, "#/components/"), "/", 2)
				sect, _ := outComp[parts[0]].(map[string]any)
				if sect == nil {
					sect = map[string]any{}
					outComp[parts[0]] = sect
				}
				if _, done := sect[parts[1]]; !done {
					src, _ := components[parts[0]].(map[string]any)
					c := src[parts[1]]
					sect[parts[1]] = c
					walk(c)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(outPaths)
	out := map[string]any{
		"openapi": spec["openapi"],
		"info": map[string]any{
			"title":   "Subset of GitHub's REST API description for githubtest",
			"version": fmt.Sprint(spec["info"].(map[string]any)["version"]),
		},
		"paths":      outPaths,
		"components": outComp,
	}
	stripText(out)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// stripText drops text meant for people: "description" and "summary"
// strings (a property of that name is a schema object, and stays),
// x-github and externalDocs.
func stripText(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "description", "summary":
				if _, ok := x.(string); ok {
					delete(v, k)
					continue
				}
			case "x-github", "externalDocs":
				delete(v, k)
				continue
			case "value", "example", "default", "enum":
				continue // data, not text for people (an example's "summary" field)
			}
			stripText(x)
		}
	case []any:
		for _, x := range v {
			stripText(x)
		}
	}
}
