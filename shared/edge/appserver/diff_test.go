package appserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/edge/appserver"
)

// A file's change reads as git writes it: a new file from /dev/null, a deleted one to it, and
// changes far apart as hunks of their own with three lines of context.
func TestUnifiedDiff(t *testing.T) {
	var before, after strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&before, "line %d\n", i)
		switch i {
		case 2:
			after.WriteString("line two\n")
		case 18:
		default:
			fmt.Fprintf(&after, "line %d\n", i)
		}
	}
	for _, tt := range []struct {
		name          string
		before, after string
		want          string
	}{
		{"same", "a\n", "a\n", ""},
		{"added", "", "new\n", "diff --git a/f.md b/f.md\n--- /dev/null\n+++ b/f.md\n@@ -0,0 +1 @@\n+new\n"},
		{"deleted", "old\n", "", "diff --git a/f.md b/f.md\n--- a/f.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"},
		{"two hunks", before.String(), after.String(), "diff --git a/f.md b/f.md\n--- a/f.md\n+++ b/f.md\n" +
			"@@ -1,5 +1,5 @@\n line 1\n-line 2\n+line two\n line 3\n line 4\n line 5\n" +
			"@@ -15,6 +15,5 @@\n line 15\n line 16\n line 17\n-line 18\n line 19\n line 20\n"},
	} {
		var b, a []byte
		if tt.before != "" {
			b = []byte(tt.before)
		}
		if tt.after != "" {
			a = []byte(tt.after)
		}
		if got := appserver.UnifiedDiff("f.md", b, a); got != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, got, tt.want)
		}
	}
}
