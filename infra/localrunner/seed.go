package localrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
)

// SeedFile is the shape of examples/account.config.example.json: one account, its skills, its
// workspaces and its agents.
type SeedFile struct {
	Username string `json:"username"`
	// SkillsDir holds the account's skills, one folder each; relative to the seed file.
	SkillsDir string `json:"skillsDir"`
	// WorkspacesDir holds the account's workspaces, one folder each (its name the workspace's,
	// its files the first version's); relative to the seed file.
	WorkspacesDir string      `json:"workspacesDir"`
	Agents        []SeedAgent `json:"agents"`
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
	if f.SkillsDir != "" && !filepath.IsAbs(f.SkillsDir) {
		f.SkillsDir = filepath.Join(filepath.Dir(path), f.SkillsDir)
	}
	if _, err := readSkills(f.SkillsDir); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.WorkspacesDir != "" && !filepath.IsAbs(f.WorkspacesDir) {
		f.WorkspacesDir = filepath.Join(filepath.Dir(path), f.WorkspacesDir)
	}
	if _, err := readWorkspaces(f.WorkspacesDir); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// seedWorkspace is a workspace of a seed file: its name and its files' changes.
type seedWorkspace struct {
	name  string
	files []workspaces.Change
}

// readWorkspaces reads every folder under dir as a workspace, checking its name and paths as
// the API does; none when dir is empty.
func readWorkspaces(dir string) ([]seedWorkspace, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading workspaces: %w", err)
	}
	var out []seedWorkspace
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if p := workspaces.NameProblem(e.Name()); p != "" {
			return nil, fmt.Errorf("workspace folder %s: the name %s", e.Name(), p)
		}
		ws := seedWorkspace{name: e.Name()}
		folder := os.DirFS(filepath.Join(dir, e.Name()))
		err := fs.WalkDir(folder, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			if problem := workspaces.PathProblem(p); problem != "" {
				return fmt.Errorf("path %s %s", p, problem)
			}
			data, err := fs.ReadFile(folder, p)
			ws.files = append(ws.files, workspaces.Change{Path: p, Data: data})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", filepath.Join(dir, e.Name()), err)
		}
		out = append(out, ws)
	}
	return out, nil
}

// readSkills parses every folder under dir as a skill, through the parser uploads take; none
// when dir is empty.
func readSkills(dir string) ([]*skills.Bundle, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading skills: %w", err)
	}
	var out []*skills.Bundle
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		folder := os.DirFS(filepath.Join(dir, e.Name()))
		files := map[string]string{}
		err := fs.WalkDir(folder, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			data, err := fs.ReadFile(folder, p)
			files[p] = string(data)
			return err
		})
		var b *skills.Bundle
		if err == nil {
			b, err = skills.ParseFiles(files)
		}
		if err != nil {
			return nil, fmt.Errorf("skill %s: %w", filepath.Join(dir, e.Name()), err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Seed creates the file's account, its skills and workspaces, and then its agents (which may
// name them),
// through the same parsing, validation and sealing as account-manage, and returns the account
// with its one-time secret.
func (r *Runner) Seed(ctx context.Context, f *SeedFile, now time.Time) (store.Account, string, error) {
	if f == nil {
		return store.Account{}, "", errors.New("no seed file")
	}
	if r.agents == nil {
		return store.Account{}, "", errors.New("the template has no AccountManageFunction to seed through")
	}
	bundles, err := readSkills(f.SkillsDir)
	if err != nil {
		return store.Account{}, "", err
	}
	if len(bundles) > 0 && r.skills == nil {
		return store.Account{}, "", errors.New("the seed file has skills, and the template keeps none (no SKILLS_TABLE and SKILLS_BUCKET)")
	}
	spaces, err := readWorkspaces(f.WorkspacesDir)
	if err != nil {
		return store.Account{}, "", err
	}
	if len(spaces) > 0 && r.workspaces == nil {
		return store.Account{}, "", errors.New("the seed file has workspaces, and the template keeps none (no WORKSPACES_TABLE and WORKSPACES_BUCKET)")
	}
	acc, secret, err := r.store.CreateAccount(ctx, f.Username, now)
	if err != nil {
		return store.Account{}, "", err
	}
	for _, b := range bundles {
		if _, err := r.skills.Put(ctx, acc.ID, b, now); err != nil {
			return store.Account{}, "", fmt.Errorf("seeding skill %s: %w", b.Name, err)
		}
	}
	for _, ws := range spaces {
		if _, err := r.workspaces.Create(ctx, acc.ID, ws.name); err != nil {
			return store.Account{}, "", fmt.Errorf("seeding workspace %s: %w", ws.name, err)
		}
		if len(ws.files) == 0 {
			continue
		}
		if _, err := r.workspaces.Commit(ctx, acc.ID, ws.name, 0, ws.files, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
			return store.Account{}, "", fmt.Errorf("seeding workspace %s: %w", ws.name, err)
		}
	}
	for i, a := range f.Agents {
		if _, err := r.agents.Create(ctx, acc.ID, a.AgentID, a.Config); err != nil {
			return store.Account{}, "", fmt.Errorf("seeding agents[%d] (%s): %w", i, a.AgentID, err)
		}
	}
	return acc, secret, nil
}
