package devstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name, body string
	typ        byte
}

// tarball builds a gzip-compressed tar in memory.
func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typ}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeSymlink {
			h.Linkname, h.Size = e.body, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var testFiles = []string{"package.json", "dist/client.js"}

func TestExtractPackage(t *testing.T) {
	tgz := tarball(t,
		entry{name: "package/package.json", body: `{"name":"x"}`},
		entry{name: "package/dist/other.js", body: "skipped"},
		entry{name: "package/dist/client.js", body: "export {}"},
		entry{name: "package/README.md", body: "skipped"},
	)
	dest := t.TempDir()
	if err := extractPackage(bytes.NewReader(tgz), dest, testFiles); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"package.json": `{"name":"x"}`, "dist/client.js": "export {}"} {
		got, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"dist/other.js", "README.md"} {
		if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(name))); err == nil {
			t.Errorf("%s was extracted; only the listed files should be", name)
		}
	}
}

func TestExtractPackageRefuses(t *testing.T) {
	good := []entry{
		{name: "package/package.json", body: "{}"},
		{name: "package/dist/client.js", body: "export {}"},
	}
	cases := map[string]struct {
		entries []entry
		errHas  string
	}{
		"parent traversal": {append([]entry{{name: "package/../../evil.js", body: "x"}}, good...), "unsafe path"},
		"wanted traversal": {append([]entry{{name: "package/dist/../../package.json", body: "x"}}, good...), "unsafe path"},
		"absolute path":    {append([]entry{{name: "/etc/evil", body: "x"}}, good...), "unsafe path"},
		"symlink":          {[]entry{good[0], {name: "package/dist/client.js", body: "/etc/passwd", typ: tar.TypeSymlink}}, "not a regular file"},
		"duplicate":        {append(good, good[1]), "appears twice"},
		"missing file":     {good[:1], "no entry package/dist/client.js"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "pkg")
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extractPackage(bytes.NewReader(tarball(t, c.entries...)), dest, testFiles)
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("err = %v, want one containing %q", err, c.errHas)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil.js")); err == nil {
				t.Error("a file was written outside the destination")
			}
		})
	}
}

func TestVerifyIntegrity(t *testing.T) {
	data := []byte("tarball bytes")
	sum := sha512.Sum512(data)
	good := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	if err := verifyIntegrity(data, good); err != nil {
		t.Errorf("matching integrity: %v", err)
	}
	if err := verifyIntegrity([]byte("other bytes"), good); err == nil || !strings.Contains(err.Error(), "integrity mismatch") {
		t.Errorf("mismatching data: err = %v", err)
	}
	for _, bad := range []string{"sha1-abc", "sha512-not base64!", "sha512-" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if err := verifyIntegrity(data, bad); err == nil {
			t.Errorf("integrity %q accepted", bad)
		}
	}
	// The pinned value must at least be well-formed.
	if err := verifyIntegrity(nil, lettaIntegrity); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("pinned integrity: err = %v, want a mismatch for empty data", err)
	}
}
