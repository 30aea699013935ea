package threadvars_test

import (
	"context"
	"fmt"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/threadvars"
)

// A thread's values are sealed to their account and name: a request's value comes first, a
// stored one opens only in a thread of its account, and a child thread starts without the
// variables its agent declares scoped.
func ExampleThread() {
	ctx := context.Background()
	box := secrets.New(secrets.NewRandomLocal())
	stored, err := threadvars.Seal(ctx, box, "acc_1", map[string]string{"REGION": "eu-west-1", "TOKEN": "t0k"})
	if err != nil {
		panic(err)
	}
	load := func() (store.Vars, error) { return stored, nil }

	th := threadvars.New(ctx, box, "acc_1", map[string]string{"REGION": "us-east-1"}, load)
	fmt.Println(th.Get("REGION"), th.Get("TOKEN"), th.Missing(agentconfig.Variables{{Name: "USER", Required: true}})[0].Name)

	other := threadvars.New(ctx, box, "acc_2", nil, load)
	fmt.Println(other.Get("TOKEN") == "", other.Err() != nil)

	child := threadvars.ForChild(stored, agentconfig.Variables{{Name: "TOKEN", Scoped: true}})
	fmt.Println(len(child))
	// Output:
	// us-east-1 t0k USER
	// true true
	// 1
}
