package secrets_test

import (
	"context"
	"fmt"

	"github.com/agentharness/harness/shared/state/secrets"
)

func ExampleBox() {
	// In development the key comes from SECRETS_LOCAL_KEY; see FromConfig.
	key, err := secrets.ParseLocalKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		panic(err)
	}
	src, err := secrets.NewLocal(key)
	if err != nil {
		panic(err)
	}
	box := secrets.New(src)
	ctx := context.Background()

	sealed, err := box.Seal(ctx, []byte("sk-live-1234"), []byte("acc_1/agt_1"))
	if err != nil {
		panic(err)
	}
	opened, err := box.Open(ctx, sealed, []byte("acc_1/agt_1"))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(opened))

	// The same blob copied into another agent's record does not open.
	_, err = box.Open(ctx, sealed, []byte("acc_1/agt_2"))
	fmt.Println(err)
	// Output:
	// sk-live-1234
	// decrypting data key: sealed secret cannot be opened: wrong key or it belongs to another record
}
