package memorytools_test

import (
	"fmt"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/memorytools"
)

// Each scope keeps its memory in a folder of its own; turns the account runs itself, with no
// end user, share _account.
func ExampleFolder() {
	for _, c := range []struct{ scope, endUser string }{
		{agentconfig.MemoryAgent, "ada"},
		{agentconfig.MemoryEndUser, "ada"},
		{agentconfig.MemoryEndUser, ""},
		{agentconfig.MemoryConversation, "ada"},
		{agentconfig.MemoryEndUser, "ada/../bob"},
	} {
		fmt.Println(memorytools.Folder(c.scope, "agt_1", "conv_1", c.endUser))
	}
	// Output:
	// agents/agt_1 <nil>
	// agents/agt_1/end-users/ada <nil>
	// agents/agt_1/end-users/_account <nil>
	// agents/agt_1/conversations/conv_1 <nil>
	//  the end user's id "ada/../bob" cannot name a memory folder: it holds a /
}
