package localrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/store"
)

// SeedFile is the shape of examples/account.config.example.json: one account and its agents.
type SeedFile struct {
	Username string      `json:"username"`
	Agents   []SeedAgent `json:"agents"`
}

// SeedAgent is one agent of a seed file.
type SeedAgent struct {
	AgentID string          `json:"agentId"`
	Config  json.RawMessage `json:"config"`
}

// ReadSeed reads and checks a seed file.
func ReadSeed(path string) (*SeedFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading seed file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f SeedFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Username == "" || len(f.Agents) == 0 {
		return nil, fmt.Errorf("%s: username and at least one agent are required", path)
	}
	for i, a := range f.Agents {
		if a.AgentID == "" {
			return nil, fmt.Errorf("%s: agents[%d].agentId is required", path, i)
		}
		if _, err := agentconfig.Parse(a.Config); err != nil {
			return nil, fmt.Errorf("%s: agents[%d]: %w", path, i, err)
		}
	}
	return &f, nil
}

// Seed creates the file's account and agents, through the same validation and sealing as
// account-manage, and returns the account with its one-time secret.
func (r *Runner) Seed(ctx context.Context, f *SeedFile, now time.Time) (store.Account, string, error) {
	if f == nil {
		return store.Account{}, "", errors.New("no seed file")
	}
	if r.agents == nil {
		return store.Account{}, "", errors.New("the template has no AccountManageFunction to seed through")
	}
	acc, secret, err := r.store.CreateAccount(ctx, f.Username, now)
	if err != nil {
		return store.Account{}, "", err
	}
	for i, a := range f.Agents {
		if _, err := r.agents.Create(ctx, acc.ID, a.AgentID, a.Config); err != nil {
			return store.Account{}, "", fmt.Errorf("seeding agents[%d] (%s): %w", i, a.AgentID, err)
		}
	}
	return acc, secret, nil
}
