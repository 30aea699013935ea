// Package agents keeps an account's agent configs: every write is validated against the
// provider registry and the static tool map before it is stored, the config's secrets (API
// keys) are sealed at rest apart from it, and reads return the config with them redacted.
// Only Load, for running a turn, sees the secrets.
package agentstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/ids"
)

// Sealer encrypts and decrypts a record's secrets, bound to aad.
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(ctx context.Context, sealed, aad []byte) ([]byte, error)
}

// Service reads and writes agent configs.
type Service struct {
	store      *store.Store
	sealer     Sealer
	checks     agentconfig.Checks
	skills     NameLister
	workspaces NameLister
	now        func() time.Time
}

// NameLister names an account's skills (skills.Store) or workspaces (workspaces.Store).
type NameLister interface {
	Names(ctx context.Context, accountID string) ([]string, error)
}

// New returns a service over st. now may be nil (time.Now).
func New(st *store.Store, sealer Sealer, checks agentconfig.Checks, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, sealer: sealer, checks: checks, now: now}
}

// WithSkills checks config.skills against the account's skills in l; without it, a config that
// names skills is refused.
func (s *Service) WithSkills(l NameLister) *Service {
	s.skills = l
	return s
}

// WithWorkspaces checks config.workspaces against the account's workspaces in l; without it, a
// config that names workspaces is refused.
func (s *Service) WithWorkspaces(l NameLister) *Service {
	s.workspaces = l
	return s
}

// View is an agent as the API shows it: its config with secrets redacted.
type View struct {
	AgentID   string          `json:"agentId"`
	Config    json.RawMessage `json:"config"`
	Version   int64           `json:"version"`
	CreatedAt string          `json:"createdAt"`
	UpdatedAt string          `json:"updatedAt"`
	// Warnings name settings that were accepted but have no effect.
	Warnings []string `json:"warnings,omitempty"`
}

func view(a store.Agent, warnings []string) View {
	return View{AgentID: a.ID, Config: a.Config, Version: a.Version, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Warnings: warnings}
}

// Create validates and stores a new agent. An empty agentID gets a generated one. Config
// errors are *agentconfig.FieldError; a taken id is store.ErrExists.
func (s *Service) Create(ctx context.Context, accountID, agentID string, raw []byte) (View, error) {
	if agentID == "" {
		agentID = store.NewID("agt_")
	}
	if p := ids.Problem(agentID); p != "" {
		return View{}, &agentconfig.FieldError{Field: "agentId", Problem: p}
	}
	v, err := agentconfig.Validate(raw, s.checks)
	if err == nil {
		err = s.checkNames(ctx, accountID, agentID, v.Config)
	}
	if err != nil {
		return View{}, err
	}
	redacted, secrets, err := agentconfig.Split(raw, v.Secrets)
	if err != nil {
		return View{}, err
	}
	if err := refusePlaceholders(v.Secrets, secrets); err != nil {
		return View{}, err
	}
	a := store.Agent{AccountID: accountID, ID: agentID, Config: redacted}
	if a.Secrets, err = s.seal(ctx, a, secrets); err != nil {
		return View{}, err
	}
	a, err = s.store.CreateAgent(ctx, a, s.now())
	if err != nil {
		return View{}, err
	}
	return view(a, v.Warnings), nil
}

// Update applies an RFC 7396 merge patch to an agent's config, validates the result and
// stores it. Secrets left out of the patch, or sent back as agentconfig.Redacted, are kept.
// A concurrent write makes it fail with store.ErrConflict rather than lose either write.
func (s *Service) Update(ctx context.Context, accountID, agentID string, patch []byte) (View, error) {
	a, err := s.store.Agent(ctx, accountID, agentID)
	if err != nil {
		return View{}, err
	}
	stored, err := s.open(ctx, a)
	if err != nil {
		return View{}, err
	}
	plain, err := agentconfig.Join(a.Config, stored)
	if err != nil {
		return View{}, err
	}
	next, err := agentconfig.MergePatch(plain, patch)
	if err != nil {
		return View{}, &agentconfig.FieldError{Field: "config", Problem: err.Error()}
	}
	if next, err = agentconfig.KeepRedacted(next, stored); err != nil {
		return View{}, err
	}
	v, err := agentconfig.Validate(next, s.checks)
	if err == nil {
		err = s.checkNames(ctx, accountID, agentID, v.Config)
	}
	if err != nil {
		return View{}, err
	}
	redacted, secrets, err := agentconfig.Split(next, v.Secrets)
	if err != nil {
		return View{}, err
	}
	if err := refusePlaceholders(v.Secrets, secrets); err != nil {
		return View{}, err
	}
	a.Config = redacted
	if a.Secrets, err = s.seal(ctx, a, secrets); err != nil {
		return View{}, err
	}
	if a, err = s.store.UpdateAgent(ctx, a, s.now()); err != nil {
		return View{}, err
	}
	return view(a, v.Warnings), nil
}

// checkNames refuses a config that names agents, skills or workspaces the account does not have.
func (s *Service) checkNames(ctx context.Context, accountID, agentID string, c *agentconfig.Config) error {
	if err := s.checkSubagents(ctx, accountID, agentID, c); err != nil {
		return err
	}
	if err := s.checkSkills(ctx, accountID, c); err != nil {
		return err
	}
	return s.checkWorkspaces(ctx, accountID, c)
}

// checkWorkspaces refuses a config.workspaces entry, or a config.memory, that names no workspace
// of the account, so a typo fails when the config is written. A workspace deleted later stops
// the agent's turns, naming it.
func (s *Service) checkWorkspaces(ctx context.Context, accountID string, c *agentconfig.Config) error {
	names := make([]string, len(c.Workspaces))
	for i, w := range c.Workspaces {
		names[i] = w.Name
	}
	how := listed{
		kind: "workspace", field: "workspaces", at: "workspaces[%d].name", env: "WORKSPACES_TABLE and WORKSPACES_BUCKET",
		create: "create it with POST /accounts/me/workspaces",
	}
	if err := checkListed(ctx, s.workspaces, accountID, names, how); err != nil || c.Memory == nil {
		return err
	}
	how.field, how.at = "memory.workspace", "memory.workspace"
	return checkListed(ctx, s.workspaces, accountID, []string{c.Memory.Workspace}, how)
}

// checkSkills refuses a config.skills entry that names no skill of the account, so a typo fails
// when the config is written. A skill deleted later is shown to the model as unavailable.
func (s *Service) checkSkills(ctx context.Context, accountID string, c *agentconfig.Config) error {
	return checkListed(ctx, s.skills, accountID, c.Skills, listed{
		kind: "skill", field: "skills", at: "skills[%d]", env: "SKILLS_TABLE and SKILLS_BUCKET",
		create: "upload it with POST /accounts/me/skills",
	})
}

// listed says how checkListed names what a config lists: its kind, its field and each entry's
// (a format of the index, or the field of a single name), the variables that keep them and how
// to make one.
type listed struct{ kind, field, at, env, create string }

// checkListed refuses the first of names that l does not list of the account, and any name
// where the deployment keeps none (l nil).
func checkListed(ctx context.Context, l NameLister, accountID string, names []string, how listed) error {
	if len(names) == 0 {
		return nil
	}
	if l == nil {
		return &agentconfig.FieldError{Field: how.field, Problem: "this deployment keeps no " + how.kind + "s (it sets no " + how.env + ")"}
	}
	have, err := l.Names(ctx, accountID)
	if err != nil {
		return err
	}
	for i, name := range names {
		if !slices.Contains(have, name) {
			at := how.at
			if strings.Contains(at, "%d") {
				at = fmt.Sprintf(at, i)
			}
			return &agentconfig.FieldError{Field: at, Problem: "there is no " + how.kind + " named " + name + " in this account (" + how.create + ")"}
		}
	}
	return nil
}

// checkSubagents refuses a config.subagent entry that names no agent of the account, so a typo
// fails when the config is written rather than on the model's first call. The agent itself may
// be named (it calls itself, to maxDepth). An agent deleted later fails its calls at run time.
func (s *Service) checkSubagents(ctx context.Context, accountID, agentID string, c *agentconfig.Config) error {
	if c.Subagent == nil {
		return nil
	}
	for i, t := range c.Subagent.Agents {
		if t.AgentID == agentID {
			continue
		}
		_, err := s.store.Agent(ctx, accountID, t.AgentID)
		if errors.Is(err, store.ErrNotFound) {
			return &agentconfig.FieldError{Field: fmt.Sprintf("subagent.agents[%d].agentId", i), Problem: "names no agent of this account: " + t.AgentID}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// refusePlaceholders refuses a secret that is the redaction placeholder: echoing a redacted
// config keeps a stored secret, but the placeholder never becomes one.
func refusePlaceholders(paths []string, secrets map[string]string) error {
	for _, p := range paths {
		if s, ok := secrets[p]; ok && s == agentconfig.Redacted {
			return &agentconfig.FieldError{Field: p, Problem: "holds the redaction placeholder; send the secret itself"}
		}
	}
	return nil
}

// Get returns one agent, redacted.
func (s *Service) Get(ctx context.Context, accountID, agentID string) (View, error) {
	a, err := s.store.Agent(ctx, accountID, agentID)
	if err != nil {
		return View{}, err
	}
	return view(a, nil), nil
}

// List returns an account's agents, redacted.
func (s *Service) List(ctx context.Context, accountID string) ([]View, error) {
	all, err := s.store.ListAgents(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(all))
	for _, a := range all {
		out = append(out, view(a, nil))
	}
	return out, nil
}

// Delete removes an agent.
func (s *Service) Delete(ctx context.Context, accountID, agentID string) error {
	return s.store.DeleteAgent(ctx, accountID, agentID)
}

// Load returns an agent's config with its secrets, to run a turn.
func (s *Service) Load(ctx context.Context, accountID, agentID string) (*agentconfig.Config, error) {
	a, err := s.store.Agent(ctx, accountID, agentID)
	if err != nil {
		return nil, err
	}
	return s.Config(ctx, a)
}

// Config is the config of a stored agent with its secrets opened.
func (s *Service) Config(ctx context.Context, a store.Agent) (*agentconfig.Config, error) {
	secrets, err := s.open(ctx, a)
	if err != nil {
		return nil, err
	}
	plain, err := agentconfig.Join(a.Config, secrets)
	if err != nil {
		return nil, err
	}
	return agentconfig.Parse(plain)
}

// aad binds sealed secrets to their agent, so they cannot be replayed onto another record.
func aad(a store.Agent) []byte { return []byte(a.AccountID + "/" + a.ID) }

func (s *Service) seal(ctx context.Context, a store.Agent, secrets map[string]string) ([]byte, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	sealed, err := SealJSON(ctx, s.sealer, secrets, aad(a))
	if err != nil {
		return nil, fmt.Errorf("sealing the secrets of agent %s: %w", a.ID, err)
	}
	return sealed, nil
}

func (s *Service) open(ctx context.Context, a store.Agent) (map[string]string, error) {
	if len(a.Secrets) == 0 {
		return nil, nil
	}
	var secrets map[string]string
	if err := OpenJSON(ctx, s.sealer, a.Secrets, aad(a), &secrets); err != nil {
		return nil, fmt.Errorf("opening the secrets of agent %s: %w", a.ID, err)
	}
	return secrets, nil
}

// errNoKey: a record has secrets to seal or open and no sealer was configured.
var errNoKey = errors.New("no secret key is configured (set SECRETS_KMS_KEY_ID or SECRETS_LOCAL_KEY)")

// SealJSON seals the JSON of a record's secrets v with sealer, bound to aad.
func SealJSON(ctx context.Context, sealer Sealer, v any, aad []byte) ([]byte, error) {
	if sealer == nil {
		return nil, errNoKey
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return sealer.Seal(ctx, plain, aad)
}

// OpenJSON opens what SealJSON sealed with the same aad into v.
func OpenJSON(ctx context.Context, sealer Sealer, sealed, aad []byte, v any) error {
	if sealer == nil {
		return errNoKey
	}
	plain, err := sealer.Open(ctx, sealed, aad)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return fmt.Errorf("decoding them: %w", err)
	}
	return nil
}
