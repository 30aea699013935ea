package jsonschema

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// maxExpansion bounds how many subschemas one value is checked against without descending
// into it (through $ref, allOf, anyOf, oneOf, not, if/then/else and schema dependencies).
const maxExpansion = 10_000

// checkRecursion refuses a schema whose references loop back on the same value: gojsonschema
// would follow {"allOf":[{"$ref":"#"}]} until the stack overflows, which kills the process (a
// stack overflow is not a panic anything can recover). It refuses, too, a schema whose
// references fan out past maxExpansion checks of one value ({"allOf":[{"$ref":"#/d/1"},
// {"$ref":"#/d/1"}]}, doubled at each level). Recursion that descends into the value
// (properties, items) ends with the value and stays allowed: a tree may refer to itself.
func checkRecursion(doc any) error {
	g := schemaGraph{nodes: map[string]*schemaNode{}}
	g.collect(doc, "", "")
	if err := g.link(doc); err != nil {
		return err
	}
	state := map[string]int{} // 0 unseen, 1 on the path, 2 done
	paths := map[string]int{}
	var visit func(ptr string) error
	visit = func(ptr string) error {
		n := g.nodes[ptr]
		state[ptr] = 1
		total := 1
		for _, e := range n.edges {
			switch state[e.to] {
			case 1:
				return &RefError{Path: e.at, Problem: "makes the schema refer back to itself for the same value, so checking a value would never end: recursion must go through properties, items or another keyword that descends into the value"}
			case 0:
				if err := visit(e.to); err != nil {
					return err
				}
			}
			total += paths[e.to]
			if total > maxExpansion {
				return &RefError{Path: e.at, Problem: fmt.Sprintf("makes one value be checked against more than %d subschemas", maxExpansion)}
			}
		}
		state[ptr], paths[ptr] = 2, total
		return nil
	}
	for _, ptr := range g.order {
		if state[ptr] == 0 {
			if err := visit(ptr); err != nil {
				return err
			}
		}
	}
	return nil
}

// schemaGraph links every object of a schema document (by JSON pointer) to the subschemas that
// apply to the same value.
type schemaGraph struct {
	nodes map[string]*schemaNode
	order []string // pointers in document order, for stable errors
}

type schemaNode struct {
	obj   map[string]any
	path  string // as refusals name it: "properties.a"
	edges []edge
}

type edge struct {
	to string // the target's pointer
	at string // where the keyword is, as refusals name it
}

func (g *schemaGraph) collect(v any, ptr, path string) {
	switch n := v.(type) {
	case []any:
		for i, e := range n {
			g.collect(e, ptr+"/"+strconv.Itoa(i), path+"["+strconv.Itoa(i)+"]")
		}
	case map[string]any:
		g.nodes[ptr] = &schemaNode{obj: n, path: path}
		g.order = append(g.order, ptr)
		for _, k := range sortedKeys(n) {
			g.collect(n[k], ptr+"/"+escapeToken(k), join(path, k))
		}
	}
}

// link adds the edges. A reference it cannot resolve to an object of the document is refused:
// gojsonschema resolves some of those (an unknown "#name") to the root, and a reference whose
// target is not known here cannot be checked for loops.
func (g *schemaGraph) link(doc any) error {
	for _, ptr := range g.order {
		n := g.nodes[ptr]
		add := func(to, at string) {
			if _, ok := g.nodes[to]; ok {
				n.edges = append(n.edges, edge{to: to, at: at})
			}
		}
		if ref, ok := n.obj["$ref"].(string); ok {
			to, ok := resolve(doc, ref)
			if _, isNode := g.nodes[to]; !ok || !isNode {
				return &RefError{Path: join(n.path, "$ref"), Problem: fmt.Sprintf("%q names no object of this schema: use \"#\" or a JSON pointer such as \"#/definitions/a\"", ref)}
			}
			add(to, join(n.path, "$ref"))
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if list, ok := n.obj[k].([]any); ok {
				for i := range list {
					add(ptr+"/"+k+"/"+strconv.Itoa(i), join(n.path, k)+"["+strconv.Itoa(i)+"]")
				}
			}
		}
		for _, k := range []string{"not", "if", "then", "else"} {
			add(ptr+"/"+k, join(n.path, k))
		}
		if deps, ok := n.obj["dependencies"].(map[string]any); ok {
			for _, k := range sortedKeys(deps) {
				add(ptr+"/dependencies/"+escapeToken(k), join(join(n.path, "dependencies"), k))
			}
		}
	}
	return nil
}

// resolve turns a local reference, "#" or a JSON pointer ("#/definitions/a", percent- and
// ~-escaped as in a URI fragment), into the pointer of what it names, as gojsonschema reads it.
func resolve(doc any, ref string) (string, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || frag != "" && !strings.HasPrefix(frag, "/") {
		return "", false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return "", false
	}
	cur, ptr := doc, ""
	for _, tok := range strings.Split(frag, "/")[1:] {
		key := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := cur.(type) {
		case map[string]any:
			cur, ok = n[key]
		case []any:
			i, err := strconv.Atoi(key)
			ok = err == nil && i >= 0 && i < len(n)
			if ok {
				cur = n[i]
			}
		default:
			ok = false
		}
		if !ok {
			return "", false
		}
		ptr += "/" + escapeToken(key)
	}
	return ptr, true
}

func escapeToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
