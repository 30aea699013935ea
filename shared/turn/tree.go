package turn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/ids"
)

// Every turn belongs to a turn tree: the turns one client request sets off. A subagent's child
// turn and a turn a POST /mcp call starts from one of the tree's turns (the MCP client sends the
// tree along, sealed, in TreeHeader) are a level below their caller and count as a turn of the
// tree; prompt tools are no turns, and a turn's continuations are the same turn. A tree deeper
// than TreeMaxDepth or with more than TreeMaxTurns turns starts no more; a root that is stopped
// or fails stops the turns below it.

// Defaults of the tree limits.
const (
	DefaultTreeMaxDepth = 10
	DefaultTreeMaxTurns = 32
)

// TreeHeader is the HTTP header in which an MCP call carries its turn's tree to the server; the
// harness's own POST /mcp honours it.
const TreeHeader = "Harness-Turn-Tree"

// treeTokenTTL bounds how long a tree token opens: longer than any invocation that holds one.
const treeTokenTTL = time.Hour

// treeAAD binds a sealed tree token to its use.
var treeAAD = []byte("harness/turn-tree")

// TreePosition is where a turn sits in its tree: the tree's root (empty for a root turn itself)
// and how many levels below the root it is.
type TreePosition struct {
	Root  string `json:"r"`
	Depth int    `json:"d"`
}

// treeToken is what TreeHeader carries: the position of the calling turn, until Expires.
type treeToken struct {
	TreePosition
	Expires int64 `json:"x"`
}

// position is the tree position of the invocation's turn, its root named when the turn is one.
func (d *invocation) position() TreePosition {
	if d.delivery.Tree != "" {
		return TreePosition{Root: d.delivery.Tree, Depth: d.delivery.TreeDepth}
	}
	return TreePosition{Root: treeRoot(d.accountID, d.conversationID, d.delivery.TurnKey)}
}

// treeRoot names the tree whose root is the conversation's turn turnKey.
func treeRoot(accountID, conversationID, turnKey string) string {
	return ids.Derived("tree_", accountID, conversationID, turnKey)
}

// Below is the position of a turn that a turn at p starts.
func (p TreePosition) Below() TreePosition { return TreePosition{Root: p.Root, Depth: p.Depth + 1} }

// joinTree counts a turn at position p of its tree, refusing it past the tree's limits.
func (e *Engine) joinTree(ctx context.Context, p TreePosition, m store.TreeMember) error {
	if p.Depth > e.opts.TreeMaxDepth {
		return &Refusal{Kind: Invalid, Message: fmt.Sprintf("this turn tree is %d turns deep already, and a tree may be %d deep", p.Depth-1, e.opts.TreeMaxDepth)}
	}
	switch err := e.opts.Store.JoinTree(ctx, p.Root, m, e.opts.TreeMaxTurns, e.opts.Now(), e.opts.EventTTL); {
	case errors.Is(err, store.ErrTreeFull):
		return &Refusal{Kind: Invalid, Message: fmt.Sprintf("this turn tree has run %d turns, as many as a tree may", e.opts.TreeMaxTurns)}
	case errors.Is(err, store.ErrTreeStopped):
		return &Refusal{Kind: Invalid, Message: "the turn that started this tree of turns was stopped or failed"}
	default:
		return err
	}
}

// checkTree refuses a turn below a root whose tree was stopped.
func (e *Engine) checkTree(ctx context.Context, p TreePosition) error {
	if p.Root == "" {
		return nil
	}
	stopped, err := e.opts.Store.TreeStopped(ctx, p.Root)
	if err == nil && stopped {
		err = &Refusal{Kind: Invalid, Message: "the turn that started this tree of turns was stopped or failed"}
	}
	return err
}

// stopTree stops the turns below a root turn that ended stopped or failed: nothing more joins
// its tree, and each turn below it that runs is asked to stop as a client's stop would.
func (d *invocation) stopTree(ctx context.Context, res Outcome) {
	if d.delivery.Tree != "" || (res.Status != StatusFailed && res.Status != StatusCancelled) {
		return
	}
	root := d.position().Root
	members, err := d.e.opts.Store.StopTree(ctx, root, d.e.opts.Now(), d.e.opts.EventTTL)
	if err != nil {
		d.log.ErrorContext(ctx, "stopping the turns below a stopped turn", "tree", root, "err", err)
		return
	}
	for _, m := range members {
		if _, err := d.e.RequestStop(ctx, m.AccountID, m.ConversationID); err != nil {
			d.log.WarnContext(ctx, "asking a turn below a stopped turn to stop", "tree", root, "threadId", m.ConversationID, "err", err)
		}
	}
}

// Tree is TreeHeader and the invocation's tree position sealed for it, once per invocation;
// empty where the engine has no sealer.
func (d *invocation) Tree(ctx context.Context) (header, value string) {
	d.treeOnce.Do(func() {
		if d.e.opts.Sealer == nil {
			return
		}
		b, _ := json.Marshal(treeToken{TreePosition: d.position(), Expires: d.e.opts.Now().Add(treeTokenTTL).Unix()})
		sealed, err := d.e.opts.Sealer.Seal(ctx, b, treeAAD)
		if err != nil {
			d.log.ErrorContext(ctx, "sealing the turn tree for MCP calls", "err", err)
			return
		}
		d.treeTok = base64.RawURLEncoding.EncodeToString(sealed)
	})
	return TreeHeader, d.treeTok
}

// OpenTree reads the tree position a TreeHeader value carries: the calling turn's. A value
// that does not open, or is past its time, is refused.
func (e *Engine) OpenTree(ctx context.Context, header string) (TreePosition, error) {
	invalid := &Refusal{Kind: Invalid, Message: "the " + TreeHeader + " header is not one the harness made, or it has expired"}
	sealed, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || e.opts.Sealer == nil {
		return TreePosition{}, invalid
	}
	b, err := e.opts.Sealer.Open(ctx, sealed, treeAAD)
	var tok treeToken
	if err != nil || json.Unmarshal(b, &tok) != nil || tok.Root == "" || time.Unix(tok.Expires, 0).Before(e.opts.Now()) {
		return TreePosition{}, invalid
	}
	return tok.TreePosition, nil
}

// JoinTree counts the turn a POST /mcp call starts, at position p (below its caller's), as a
// turn of the caller's tree, refusing it past the tree's limits; the turn then runs with its
// Start's Tree set to p.
func (e *Engine) JoinTree(ctx context.Context, p TreePosition, accountID, conversationID, eventID string) error {
	return e.joinTree(ctx, p, store.TreeMember{AccountID: accountID, ConversationID: conversationID, Key: eventID})
}
