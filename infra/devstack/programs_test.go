package devstack

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSystem is the machine a finder sees: variables, files (executables all), the PATH
// directory /bin, and the commands run, the last of which may install files.
type fakeSystem struct {
	env      map[string]string
	files    map[string]bool
	ran      []string
	fail     string   // a command that fails
	installs []string // files the apt-get install adds
}

func (s *fakeSystem) finder(prog Program, canInstall bool) *finder {
	return &finder{
		prog:   prog,
		getenv: func(k string) string { return s.env[k] },
		lookPath: func(name string) (string, error) {
			if strings.Contains(name, "/") {
				if s.files[name] {
					return name, nil
				}
				return "", exec.ErrNotFound
			}
			if s.files["/bin/"+name] {
				return "/bin/" + name, nil
			}
			return "", exec.ErrNotFound
		},
		exists:     func(p string) bool { return s.files[p] },
		canInstall: canInstall,
		run: func(_ context.Context, env []string, name string, args ...string) error {
			line := strings.Join(append(append(env, name), args...), " ")
			s.ran = append(s.ran, line)
			if line == s.fail {
				return errors.New("exit status 100")
			}
			if strings.Contains(line, " install ") {
				for _, f := range s.installs {
					s.files[f] = true
				}
			}
			return nil
		},
	}
}

func TestFinder(t *testing.T) {
	const (
		update       = "apt-get update"
		install      = "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y chromium"
		installBwrap = "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y bubblewrap"
	)
	tests := []struct {
		name       string
		prog       *Program // nil: Chromium
		sys        fakeSystem
		canInstall bool
		want       string
		wantRan    []string
		wantErr    []string // substrings of the error; none means no error
	}{
		{
			name: "the variable wins",
			sys:  fakeSystem{env: map[string]string{Chromium.EnvVar: "/opt/chrome/chrome"}, files: map[string]bool{"/opt/chrome/chrome": true, "/bin/chromium": true}},
			want: "/opt/chrome/chrome",
		},
		{
			name: "the variable names a command on PATH",
			sys:  fakeSystem{env: map[string]string{Chromium.EnvVar: "google-chrome"}, files: map[string]bool{"/bin/google-chrome": true}},
			want: "/bin/google-chrome",
		},
		{
			name:       "the variable names nothing: no install",
			sys:        fakeSystem{env: map[string]string{Chromium.EnvVar: "/nowhere/chrome"}, files: map[string]bool{}},
			canInstall: true,
			wantErr:    []string{Chromium.EnvVar + "=/nowhere/chrome"},
		},
		{
			name: "chromium on PATH",
			sys:  fakeSystem{files: map[string]bool{"/bin/chromium": true, "/bin/chromium-browser": true}},
			want: "/bin/chromium",
		},
		{
			name: "chromium-browser on PATH",
			sys:  fakeSystem{files: map[string]bool{"/bin/chromium-browser": true, Chromium.fallback: true}},
			want: "/bin/chromium-browser",
		},
		{
			name: "Debian's path off PATH",
			sys:  fakeSystem{files: map[string]bool{Chromium.fallback: true}},
			want: Chromium.fallback,
		},
		{
			name:       "missing, installed with apt-get",
			sys:        fakeSystem{files: map[string]bool{}, installs: []string{"/bin/chromium"}},
			canInstall: true,
			want:       "/bin/chromium",
			wantRan:    []string{update, install},
		},
		{
			name:    "missing, not root or no apt-get",
			sys:     fakeSystem{files: map[string]bool{}},
			wantErr: []string{"not installed", "apt-get install chromium", "dnf install chromium", Chromium.EnvVar + " to Chrome's binary"},
		},
		{
			name:       "apt-get fails",
			sys:        fakeSystem{files: map[string]bool{}, fail: install},
			canInstall: true,
			wantRan:    []string{update, install},
			wantErr:    []string{"apt-get install chromium: exit status 100", "dnf install chromium"},
		},
		{
			name:       "installed and still missing",
			sys:        fakeSystem{files: map[string]bool{}},
			canInstall: true,
			wantRan:    []string{update, install},
			wantErr:    []string{"still not found"},
		},
		{
			name: "bwrap on PATH",
			prog: &Bubblewrap,
			sys:  fakeSystem{files: map[string]bool{"/bin/bwrap": true, Bubblewrap.fallback: true}},
			want: "/bin/bwrap",
		},
		{
			name: "HARNESS_BWRAP wins",
			prog: &Bubblewrap,
			sys:  fakeSystem{env: map[string]string{Bubblewrap.EnvVar: "/opt/bwrap"}, files: map[string]bool{"/opt/bwrap": true, "/bin/bwrap": true}},
			want: "/opt/bwrap",
		},
		{
			name:       "bwrap missing, installed with apt-get",
			prog:       &Bubblewrap,
			sys:        fakeSystem{files: map[string]bool{}, installs: []string{Bubblewrap.fallback}},
			canInstall: true,
			want:       Bubblewrap.fallback,
			wantRan:    []string{update, installBwrap},
		},
		{
			name:    "bwrap missing, not root or no apt-get",
			prog:    &Bubblewrap,
			sys:     fakeSystem{files: map[string]bool{}},
			wantErr: []string{"sandbox tests", "not installed", "apt-get install bubblewrap", "dnf install bubblewrap", "Linux only"},
		},
		{
			name:       "apt-get fails for bwrap",
			prog:       &Bubblewrap,
			sys:        fakeSystem{files: map[string]bool{}, fail: installBwrap},
			canInstall: true,
			wantRan:    []string{update, installBwrap},
			wantErr:    []string{"apt-get install bubblewrap: exit status 100", "dnf install bubblewrap"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			announced := false
			prog := Chromium
			if tt.prog != nil {
				prog = *tt.prog
			}
			got, err := tt.sys.finder(prog, tt.canInstall).ensure(context.Background(), func() { announced = true })
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("ensure: %v", err)
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("ensure error = %v, want it to contain %q", err, want)
				}
			}
			if got != tt.want {
				t.Errorf("ensure = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.wantRan, tt.sys.ran); diff != "" {
				t.Errorf("commands run (-want +got):\n%s", diff)
			}
			if announced != (len(tt.wantRan) > 0) {
				t.Errorf("install announced: %v, want %v", announced, len(tt.wantRan) > 0)
			}
		})
	}
}
