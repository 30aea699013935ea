package lambdadeps_test

import (
	"encoding/json"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

// envName is the grammar of an environment variable's name.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// identity is the config whose every field holds the name of its variable.
var identity = lambdadeps.ConfigFrom(func(name string) string { return name })

// Every field of Config names its variable, and ConfigFrom fills it from that one.
func TestConfigFrom(t *testing.T) {
	names := lambdadeps.Variables()
	if len(names) < 50 || !slices.Contains(names, "ACCOUNTS_TABLE") || !slices.Contains(names, "NATS_CREDENTIALS_TTL") {
		t.Fatalf("Variables() = %v, want every variable of Config", names)
	}
	for _, name := range names {
		if !envName.MatchString(name) {
			t.Errorf("Config reads %q: a field without an env tag, or a tag that names no variable", name)
		}
	}
	c := identity
	for field, got := range map[string]string{
		"Tables.Accounts": c.Tables.Accounts, "Channels.APIs.Telegram": c.Channels.APIs.Telegram,
		"Tools.ServiceURL": c.Tools.ServiceURL, "Accounts.ServiceURL": c.Accounts.ServiceURL, "NATS.CredentialsTTL": c.NATS.CredentialsTTL,
	} {
		if !slices.Contains(names, got) {
			t.Errorf("ConfigFrom set %s to %q, want the value of its variable", field, got)
		}
	}
}

func TestRequire(t *testing.T) {
	c := lambdadeps.ConfigFrom(func(name string) string { return map[string]string{"ACCOUNTS_TABLE": "accounts"}[name] })
	if err := c.Require("ACCOUNTS_TABLE"); err != nil {
		t.Errorf("Require(ACCOUNTS_TABLE) = %v, want nil: it is set", err)
	}
	err := c.Require("ACCOUNTS_TABLE", "AGENTS_TABLE", "EVENTS_TABLE")
	if err == nil || err.Error() != "environment variable AGENTS_TABLE is not set" {
		t.Errorf("Require = %v, want the first unset variable named", err)
	}
}

// Every variable a builtin tool falls back to is one of Config.Tools: Tools.Getenv is all the
// environment the tools see.
func TestToolsHoldEveryToolVariable(t *testing.T) {
	asked := map[string]bool{}
	for _, name := range builtintools.Names() {
		getenv := func(v string) string {
			asked[v] = true
			return "https://tools.example"
		}
		// Errors aside (an entry may want options): the variables are resolved first.
		_, _ = builtintools.Build(map[string]json.RawMessage{name: json.RawMessage(`{}`)}, tool.Env{Getenv: getenv})
	}
	if !asked["TAVILY_API_KEY"] {
		t.Fatalf("the builtin tools asked for %v, not TAVILY_API_KEY: the builds did not resolve their variables", slices.Sorted(maps.Keys(asked)))
	}
	for name := range asked {
		if identity.Tools.Getenv(name) != name {
			t.Errorf("a builtin tool reads the deployment's %s, which Config.Tools does not hold", name)
		}
	}
}

// readElsewhere are the documented variables no function's config reads, and who reads them.
var readElsewhere = map[string]string{
	"HARNESS_PORT":              "make dev",
	"OPENAI_MODEL":              "make dev",
	"GOGC":                      "the Go runtime",
	"AWS_REGION":                "the AWS SDK",
	"AWS_ENDPOINT_URL":          "the AWS SDK (and awsclient, which signs for emulators)",
	"AWS_ENDPOINT_URL_DYNAMODB": "the AWS SDK (and awsclient)",
	"AWS_ENDPOINT_URL_SQS":      "the AWS SDK (and awsclient)",
	"AWS_ENDPOINT_URL_S3":       "the AWS SDK (and awsclient)",
}

// docRow is a row of a table in docs/configuration.md: its variables and who uses them.
type docRow struct {
	vars   []string
	usedBy []string
}

// documented parses the variable tables of docs/configuration.md: rows whose first cell names
// variables in backticks, and whose second says who uses them.
func documented(t *testing.T, root string) map[string]docRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	rows := map[string]docRow{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		var row docRow
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			if envName.MatchString(m[1]) {
				row.vars = append(row.vars, m[1])
			}
		}
		for user := range strings.SplitSeq(cells[2], ",") {
			row.usedBy = append(row.usedBy, strings.Trim(strings.TrimSpace(user), "`"))
		}
		for _, v := range row.vars {
			if _, twice := rows[v]; twice {
				t.Errorf("docs/configuration.md documents %s twice", v)
			}
			rows[v] = row
		}
	}
	if len(rows) < 50 {
		t.Fatalf("found %d variables in docs/configuration.md's tables: the parse looked in the wrong place", len(rows))
	}
	return rows
}

// docs/configuration.md documents every variable the functions' config reads and no other
// (but those of readElsewhere), and template.yaml gives a function only documented variables,
// each to the functions its row names, and to all of them.
func TestConfigIsDocumented(t *testing.T) {
	tplPath, err := template.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(tplPath)
	docs := documented(t, root)
	read := lambdadeps.Variables()
	for _, name := range read {
		if _, ok := docs[name]; !ok {
			t.Errorf("the functions read %s, which docs/configuration.md does not document: add it to a table there", name)
		}
		if who, ok := readElsewhere[name]; ok {
			t.Errorf("readElsewhere says %s is read by %s, but the functions' config reads it", name, who)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if _, ok := readElsewhere[name]; !ok && !slices.Contains(read, name) {
			t.Errorf("docs/configuration.md documents %s, which no function reads: remove it, or read it in lambdadeps.Config", name)
		}
	}
	for name := range readElsewhere {
		if _, ok := docs[name]; !ok {
			t.Errorf("readElsewhere names %s, which docs/configuration.md does not document", name)
		}
	}

	tpl, err := template.Load(tplPath)
	if err != nil {
		t.Fatal(err)
	}
	var functions []string
	given := map[string][]string{} // function names by variable
	for _, fn := range tpl.Functions() {
		env, err := tpl.FunctionEnv(fn, func(id string) string { return id })
		if err != nil {
			t.Fatal(err)
		}
		name := path.Base(strings.TrimSuffix(fn.CodeURI, "/"))
		functions = append(functions, name)
		for v := range env {
			given[v] = append(given[v], name)
			row, ok := docs[v]
			switch {
			case !ok:
				t.Errorf("template.yaml gives %s %s, which docs/configuration.md does not document", name, v)
			case !slices.Contains(read, v) && readElsewhere[v] == "":
				t.Errorf("template.yaml gives %s %s, which no function reads", name, v)
			case !slices.Contains(row.usedBy, "functions") && !slices.Contains(row.usedBy, name):
				t.Errorf("template.yaml gives %s %s, but docs/configuration.md says only %v use it", name, v, row.usedBy)
			}
		}
	}
	for v, fns := range given {
		for _, user := range docs[v].usedBy {
			if slices.Contains(functions, user) && !slices.Contains(fns, user) {
				t.Errorf("docs/configuration.md says %s uses %s, but template.yaml gives it only to %v", user, v, fns)
			}
		}
	}
}
