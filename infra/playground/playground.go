// Package playground serves the playground page, an AI SDK front end (React and useChat)
// for trying agents in a browser against the harness on the same origin. The page is built
// from src/ by build.mjs into dist/, which is committed and embedded, so Go builds need no
// npm; TestDistIsBuiltFromSource keeps dist/ in step with src/.
package playground

import (
	"embed"
	"net/http"
	"strconv"
)

//go:embed dist
var dist embed.FS

// Prefix is the URL path the page lives under.
const Prefix = "/playground/"

// csp lets the page load only its own script and styles and talk only to its own origin.
const csp = "default-src 'self'; script-src 'self'; connect-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// files maps each URL path the page has to its file in dist and its content type.
var files = map[string]struct{ name, contentType string }{
	"/playground":         {"dist/index.html", "text/html; charset=utf-8"},
	Prefix:                {"dist/index.html", "text/html; charset=utf-8"},
	Prefix + "index.html": {"dist/index.html", "text/html; charset=utf-8"},
	Prefix + "app.js":     {"dist/app.js", "text/javascript; charset=utf-8"},
	Prefix + "app.css":    {"dist/app.css", "text/css; charset=utf-8"},
}

// Handler serves the page at /playground and /playground/ and its assets under /playground/;
// any other path is 404. It matches the request's whole path, so mount it on both patterns,
// unstripped: mux.Handle("/playground", h) and mux.Handle("/playground/", h).
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, err := dist.ReadFile(f.name)
		if err != nil {
			// Only a build that embedded no page gets here.
			http.Error(w, "the playground is not built", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		// no-cache revalidates on every load, so a rebuilt page is never stale.
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	})
}
