package template

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// parseDocument reads a template and rewrites CloudFormation's short-form tags into their long
// forms (`!Ref X` becomes {Ref: X}, `!GetAtt A.B` becomes {Fn::GetAtt: [A, B]}), so the rest of
// the package, and JSON, see intrinsics as plain maps.
func parseDocument(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("parsing yaml: the template is not a mapping")
	}
	expandTags(doc.Content[0])
	return doc.Content[0], nil
}

// expandTags rewrites every node tagged with a local tag (one "!", not YAML's own "!!") in place.
func expandTags(n *yaml.Node) {
	for _, c := range n.Content {
		expandTags(c)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return
	}
	name := strings.TrimPrefix(n.Tag, "!")
	key := "Fn::" + name
	if name == "Ref" || name == "Condition" {
		key = name
	}
	arg := *n
	arg.Style &^= yaml.TaggedStyle
	switch arg.Kind {
	case yaml.ScalarNode:
		arg.Tag = "!!str"
	case yaml.SequenceNode:
		arg.Tag = "!!seq"
	case yaml.MappingNode:
		arg.Tag = "!!map"
	}
	if name == "GetAtt" && arg.Kind == yaml.ScalarNode {
		// The long form is a [resource, attribute] list; attributes may themselves contain dots.
		resource, attribute, _ := strings.Cut(arg.Value, ".")
		arg = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column,
			Content: []*yaml.Node{str(resource), str(attribute)}}
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column,
		Content: []*yaml.Node{str(key), &arg}}
}

func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// intrinsic reports the function name and argument of a node that is a single intrinsic
// function call ({Ref: X}, {Fn::Sub: ...}).
func intrinsic(n *yaml.Node) (name string, arg *yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return "", nil, false
	}
	name = n.Content[0].Value
	if name != "Ref" && name != "Condition" && !strings.HasPrefix(name, "Fn::") {
		return "", nil, false
	}
	return name, n.Content[1], true
}

// merge returns own laid over global the way SAM applies Globals: maps merge key by key, lists
// are concatenated (global first), anything else (intrinsics included) is replaced.
func merge(global, own *yaml.Node) *yaml.Node {
	switch {
	case global.Kind == 0: // absent
		return own
	case global.Kind == yaml.SequenceNode && own.Kind == yaml.SequenceNode:
		out := *own
		out.Content = append(append([]*yaml.Node{}, global.Content...), own.Content...)
		return &out
	case global.Kind != yaml.MappingNode || own.Kind != yaml.MappingNode:
		return own
	}
	if _, _, ok := intrinsic(global); ok {
		return own
	}
	if _, _, ok := intrinsic(own); ok {
		return own
	}
	out := *global
	out.Content = append([]*yaml.Node{}, global.Content...)
	for i := 0; i < len(own.Content); i += 2 {
		key, value := own.Content[i], own.Content[i+1]
		if j := keyIndex(&out, key.Value); j >= 0 {
			out.Content[j+1] = merge(out.Content[j+1], value)
		} else {
			out.Content = append(out.Content, key, value)
		}
	}
	return &out
}

func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}
