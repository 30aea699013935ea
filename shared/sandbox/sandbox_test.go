package sandbox_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/sandbox"
)

func TestCheckPath(t *testing.T) {
	for _, p := range []string{"a", "a/b.txt", "dir/sub/file.go", ".hidden", "a..b", "café/naïve", strings.Repeat("x/", 63) + "y", `a"b`} {
		if err := sandbox.CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{
		"", "/etc/passwd", "..", "../a", "a/../../b", "a/..", ".", "./a", "a/./b", "a//b", "a/",
		"a\x00b", "a\nb", "a\x7fb", "a\u0085b", "\xff", strings.Repeat("x", 256), strings.Repeat("a/", 512) + "b", strings.Repeat("x/", 64) + "y", `a\b`,
	} {
		if err := sandbox.CheckPath(p); err == nil {
			t.Errorf("CheckPath(%q) = nil, want a refusal", p)
		}
	}
}

func TestRequestCheck(t *testing.T) {
	ok := sandbox.Request{Command: "true", Files: []sandbox.File{{Path: "a/b", Content: []byte("x")}, {Path: "a/c"}}}
	if err := ok.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*sandbox.Request)
		field string
	}{
		{"empty command", func(r *sandbox.Request) { r.Command = " " }, "command"},
		{"NUL in command", func(r *sandbox.Request) { r.Command = "a\x00b" }, "command"},
		{"long command", func(r *sandbox.Request) { r.Command = strings.Repeat("x", sandbox.MaxCommandBytes+1) }, "command"},
		{"network", func(r *sandbox.Request) { r.Network = "host" }, "network"},
		{"absolute path", func(r *sandbox.Request) { r.Files[0].Path = "/etc/passwd" }, "files[0].path"},
		{"dot-dot path", func(r *sandbox.Request) { r.Files[1].Path = "../x" }, "files[1].path"},
		{"same path twice", func(r *sandbox.Request) { r.Files[1].Path = "a/b" }, "files[1].path"},
		{"file over a directory", func(r *sandbox.Request) { r.Files[1].Path = "a/b/c" }, "files[1].path"},
		{"mode", func(r *sandbox.Request) { r.Files[0].Mode = 0o4755 }, "files[0].mode"},
		{"negative wall time", func(r *sandbox.Request) { r.Limits.WallSeconds = -1 }, "limits.wallSeconds"},
		{"long wall time", func(r *sandbox.Request) { r.Limits.WallSeconds = sandbox.MaxWallSeconds + 1 }, "limits.wallSeconds"},
		{"cpu", func(r *sandbox.Request) { r.Limits.CPUSeconds = sandbox.MaxCPUSeconds + 1 }, "limits.cpuSeconds"},
		{"too little memory", func(r *sandbox.Request) { r.Limits.MemoryBytes = 1 << 20 }, "limits.memoryBytes"},
		{"too much memory", func(r *sandbox.Request) { r.Limits.MemoryBytes = sandbox.MaxMemoryBytes + 1 }, "limits.memoryBytes"},
		{"output", func(r *sandbox.Request) { r.Limits.OutputBytes = sandbox.MaxOutputBytes + 1 }, "limits.outputBytes"},
		{"max files", func(r *sandbox.Request) { r.Limits.MaxFiles = -3 }, "limits.maxFiles"},
		{"max bytes", func(r *sandbox.Request) { r.Limits.MaxBytes = sandbox.MaxMaxBytes + 1 }, "limits.maxBytes"},
		{"more files than handed back", func(r *sandbox.Request) { r.Limits.MaxFiles = 1 }, "limits.maxFiles"},
		{"env name", func(r *sandbox.Request) { r.Env = map[string]string{"1X": "v"} }, "env"},
		{"env reserved", func(r *sandbox.Request) { r.Env = map[string]string{"PATH": "/tmp"} }, "env"},
		{"env NUL", func(r *sandbox.Request) { r.Env = map[string]string{"X": "a\x00b"} }, "env"},
		{"env size", func(r *sandbox.Request) { r.Env = map[string]string{"X": strings.Repeat("v", sandbox.MaxEnvBytes)} }, "env"},
		{"bigger files than handed back", func(r *sandbox.Request) { r.Files[1].Content = make([]byte, 10); r.Limits.MaxBytes = 10 }, "limits.maxBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			r.Files = append([]sandbox.File(nil), ok.Files...)
			tt.edit(&r)
			err := r.Check()
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Check = %v, want a refusal naming %s", err, tt.field)
			}
		})
	}
}

// The zero limits are the documented defaults, and the JSON of a request is the contract's.
func TestLimitsDefaultsAndJSON(t *testing.T) {
	got := sandbox.Limits{WallSeconds: 5}.WithDefaults()
	want := sandbox.Limits{CPUSeconds: 30, MemoryBytes: 512 << 20, WallSeconds: 5, OutputBytes: 64 << 10, MaxFiles: 1000, MaxBytes: 8 << 20}
	if got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	b, err := json.Marshal(sandbox.Request{Command: "ls", Files: []sandbox.File{{Path: "a", Content: []byte("hi"), Mode: 0o755}}, Limits: sandbox.Limits{WallSeconds: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"command":"ls","files":[{"path":"a","content":"aGk=","mode":493}],"limits":{"wallSeconds":5}}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}
