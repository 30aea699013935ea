package playground_test

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/playground"
	"github.com/agentharness/harness/infra/testenv"
)

func TestHandler(t *testing.T) {
	index, err := os.ReadFile("dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path string
		status       int
		contentType  string
		body         []byte // nil: not checked
	}{
		{"GET", "/playground", 200, "text/html; charset=utf-8", index},
		{"GET", "/playground/", 200, "text/html; charset=utf-8", index},
		{"GET", "/playground/index.html", 200, "text/html; charset=utf-8", index},
		{"GET", "/playground/app.js", 200, "text/javascript; charset=utf-8", nil},
		{"GET", "/playground/app.css", 200, "text/css; charset=utf-8", nil},
		{"HEAD", "/playground/app.js", 200, "text/javascript; charset=utf-8", []byte{}},
		{"GET", "/playground/nope.js", 404, "", nil},
		{"GET", "/playground/dist/app.js", 404, "", nil},
		{"GET", "/playground/../go.mod", 404, "", nil},
		{"GET", "/playgroundx", 404, "", nil},
		{"GET", "/", 404, "", nil},
		{"POST", "/playground/app.js", 405, "", nil},
	}
	h := playground.Handler()
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("status: got %d, want %d (%s)", res.StatusCode, tt.status, body)
			}
			if tt.status != http.StatusOK {
				return
			}
			want := map[string]string{
				"Content-Type":           tt.contentType,
				"Cache-Control":          "no-cache",
				"X-Content-Type-Options": "nosniff",
			}
			for k, v := range want {
				if got := res.Header.Get(k); got != v {
					t.Errorf("%s: got %q, want %q", k, got, v)
				}
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'self'", "script-src 'self'", "connect-src 'self'", "style-src 'self'", "img-src 'self' data:"} {
				if !strings.Contains(csp, d) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
				}
			}
			if strings.Contains(csp, "unsafe-") {
				t.Errorf("Content-Security-Policy %q allows unsafe sources", csp)
			}
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Errorf("body: got %d bytes, want %d", len(body), len(tt.body))
			}
			if tt.body == nil && len(body) == 0 {
				t.Error("empty body")
			}
		})
	}
}

// TestIndexHasNoInlineCode checks the page needs nothing the CSP refuses: its script and
// styles are files, under the prefix.
func TestIndexHasNoInlineCode(t *testing.T) {
	index, err := os.ReadFile("dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(index)
	for _, want := range []string{`<script defer src="/playground/app.js"></script>`, `<link rel="stylesheet" href="/playground/app.css">`} {
		if !strings.Contains(page, want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("index.html has %d script elements, want 1", n)
	}
	if strings.Contains(page, "<style") || strings.Contains(page, "style=") {
		t.Error("index.html has inline styles")
	}
}

// TestDistIsBuiltFromSource rebuilds the page and compares it with the committed dist/,
// which is what Go embeds.
func TestDistIsBuiltFromSource(t *testing.T) {
	node := testenv.Node(t)
	out := t.TempDir()
	cmd := exec.Command(node, "build.mjs", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.mjs: %v\n%s", err, b)
	}
	built := files(t, out)
	committed := files(t, "dist")
	for name, want := range built {
		got, ok := committed[name]
		switch {
		case !ok:
			t.Errorf("dist/%s is missing: run node infra/playground/build.mjs", name)
		case !bytes.Equal(got, want):
			t.Errorf("dist/%s differs from a build of src (%d bytes, built %d): run node infra/playground/build.mjs", name, len(got), len(want))
		}
	}
	for name := range committed {
		if _, ok := built[name]; !ok {
			t.Errorf("dist/%s is not built from src: delete it and run node infra/playground/build.mjs", name)
		}
	}
}

// files reads every file under dir, by its slash-separated path there.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
