package workspaces_test

import (
	"fmt"

	"github.com/agentharness/harness/shared/state/workspaces"
)

// A path is checked the same way wherever it comes from: a route, or a tool's arguments.
func ExamplePathProblem() {
	for _, p := range []string{"docs/plan.md", "/etc/passwd", "docs/../secret", "docs//plan.md"} {
		if problem := workspaces.PathProblem(p); problem != "" {
			fmt.Printf("%s: path %s\n", p, problem)
			continue
		}
		fmt.Printf("%s: ok\n", p)
	}
	// Output:
	// docs/plan.md: ok
	// /etc/passwd: path must be relative: no leading /
	// docs/../secret: path must not have . or .. segments
	// docs//plan.md: path must not have empty segments (// or a trailing /)
}
