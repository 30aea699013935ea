package agentconfig

import (
	"errors"

	"github.com/agentharness/harness/shared/wire/httpjson"
)

// HTTPError turns a config problem into a 400 naming the field, for every edge that takes a
// config (account-manage, the App Server's create_agent); other errors pass as they are.
func HTTPError(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return httpjson.FieldError(fe.Field, fe.Problem)
	}
	return err
}
