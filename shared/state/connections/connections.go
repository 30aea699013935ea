// Package connections keeps the WebSocket side of the harness in DynamoDB: the open
// connections, the runtimes (account + conversation) each one drives with the external tools it
// registered for them, and the run a runtime is busy with. It is shared state because in AWS
// every frame is its own Lambda invocation, and a turn runs in yet another one.
//
// One table, keys pk/sk:
//
//	conn#<id>               #                  the connection: account, channel, and the
//	                                           credential it was opened with (the secret's hash,
//	                                           or an end-user token's end user, agents, key and
//	                                           expiry)
//	conn#<id>               rt#<conversation>  back-reference, to clean up on disconnect
//	rt#<account>#<conv>     conn#<id>          a subscription: agent, channel, external tools, and
//	                                           whether it waits for a replay of the running turn
//	rt#<account>#<conv>     #run               the runtime's latest run, an abort or replay asked
//	                                           of it, and whether its end reached anyone
//	rt#<account>#<conv>     q#<event>          an input accepted while a run was busy
//	acct#<account>          conn#<id>          a connection of the account: its channel (a
//	                                           stream-channel one gets the account's events)
//
// Every item expires (TTL) a little after API Gateway's two-hour connection limit, so a
// connection whose $disconnect never ran cleans itself up.
//
// The registry also ends connections whose authority ended (Revoke, RevokeAccount): a rotated
// secret or a deleted account closes every socket opened with the old secret, through Poster.
package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentharness/harness/shared/wire/wsconn"
)

// Lifetime is how long a connection's items live: API Gateway closes a connection after two
// hours.
const Lifetime = 3 * time.Hour

// Channels a connection can be opened on: both (the default), or one half of a split pair.
const (
	Both    = ""
	Control = "control"
	Stream  = "stream"
)

// ErrNotFound: no such connection (it closed, or never opened).
var ErrNotFound = errors.New("connection not found")

// Registry reads and writes the connections table.
type Registry struct {
	db    *dynamodb.Client
	table string
}

// New returns a registry on table.
func New(db *dynamodb.Client, table string) *Registry { return &Registry{db: db, table: table} }

// Connection is an open WebSocket connection of an account.
type Connection struct {
	ID        string
	AccountID string
	Channel   string
	// SecretHash is the hash of the account secret the upgrade carried: the connection's
	// authority lasts while the account is live and still has that secret. Empty for a token's.
	SecretHash string
	// EndUser, Agents, KeyID and Until are those of the end-user token the upgrade carried
	// (EndUser empty for the secret's): the connection acts for the end user on the agents
	// (none: all), while the account holds the key that signed the token, until the token
	// expires. A row written before tokens opened sockets has none of them: the secret's.
	EndUser string
	Agents  []string
	KeyID   string
	Until   time.Time
}

// Token reports whether the connection was opened with an end-user token.
func (c Connection) Token() bool { return c.EndUser != "" }

// Expired reports whether the connection's token has expired at now.
func (c Connection) Expired(now time.Time) bool { return !c.Until.IsZero() && !now.Before(c.Until) }

// ToolGroup is a set of controller-owned tools, visible on every turn (no ScopeID) or only on
// turns that select its scope.
type ToolGroup struct {
	ScopeID string    `json:"scope_id,omitempty"`
	Tools   []ToolDef `json:"tools"`
}

// ToolDef is one controller-owned tool as the controller registered it.
type ToolDef struct {
	Name        string          `json:"name"`
	Label       string          `json:"label,omitempty"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Subscriber is a connection that drives or watches a runtime.
type Subscriber struct {
	ConnectionID string
	Channel      string
	AgentID      string
	Tools        []ToolGroup
	// Replay: the connection asked for the running turn's output so far (SubscribeForReplay)
	// and gets nothing live until someone gives it that (ClaimReplay).
	Replay bool
	// Observer: a stream-channel connection of the account rather than a subscriber of the
	// runtime.
	Observer bool
	// Until is when the connection's end-user token expires (zero for the secret's): it gets
	// nothing after.
	Until time.Time
}

// Run is the latest turn of a runtime, for sync to replay.
type Run struct {
	EventID string `json:"eventId"`
	// FromSeq is the first conversation message the run wrote.
	FromSeq int64 `json:"fromSeq"`
	// Status is the run's event status (processing, waiting_for_approval, …).
	Status string `json:"status"`
	// Turn holds what a continuation of the run needs again (its tools and scopes), opaque here.
	Turn      json.RawMessage `json:"turn,omitempty"`
	UpdatedAt time.Time       `json:"updatedAt"`
	// Unseen: the run ended and no subscriber of the runtime got its end, so the next sync
	// replays it (set by Unseen, cleared by Seen; a later run is never unseen by its mark).
	Unseen bool `json:"-"`
}

func connKey(id string) string { return "conn#" + id }
func runtimeKey(accountID, conversationID string) string {
	return "rt#" + accountID + "#" + conversationID
}
func accountKey(accountID string) string { return "acct#" + accountID }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": ddb.S(pk), "sk": ddb.S(sk)}
}

func expiry(now time.Time) types.AttributeValue { return ddb.N(now.Add(Lifetime).Unix()) }

// Connect records a new connection, and lists it under its account, where RevokeAccount finds it
// (and, on the stream channel, the account's events).
func (r *Registry) Connect(ctx context.Context, c Connection, now time.Time) error {
	item := key(connKey(c.ID), "#")
	item["accountId"], item["channel"], item["expiresAt"] = ddb.S(c.AccountID), ddb.S(c.Channel), expiry(now)
	item["secretHash"] = ddb.S(c.SecretHash)
	if c.Token() {
		item["endUser"], item["keyId"], item["until"] = ddb.S(c.EndUser), ddb.S(c.KeyID), ddb.N(c.Until.Unix())
		if len(c.Agents) > 0 {
			item["agents"] = ddb.L(c.Agents)
		}
	}
	item["connectedAt"] = ddb.S(now.UTC().Format(time.RFC3339Nano))
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: item}); err != nil {
		return fmt.Errorf("recording connection %s: %w", c.ID, err)
	}
	sub := key(accountKey(c.AccountID), connKey(c.ID))
	sub["channel"], sub["expiresAt"] = ddb.S(c.Channel), expiry(now)
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: sub}); err != nil {
		return fmt.Errorf("listing connection %s under its account: %w", c.ID, err)
	}
	return nil
}

// Connection reads an open connection, or ErrNotFound.
func (r *Registry) Connection(ctx context.Context, id string) (Connection, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &r.table, Key: key(connKey(id), "#"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Connection{}, fmt.Errorf("loading connection %s: %w", id, err)
	}
	if out.Item == nil {
		return Connection{}, ErrNotFound
	}
	it := out.Item
	c := Connection{
		ID: id, AccountID: ddb.String(it, "accountId"), Channel: ddb.String(it, "channel"), SecretHash: ddb.String(it, "secretHash"),
		EndUser: ddb.String(it, "endUser"), Agents: ddb.Strings(it, "agents"), KeyID: ddb.String(it, "keyId"),
	}
	c.Until = until(it)
	return c, nil
}

// until reads an item's token expiry (Unix seconds); zero when it has none.
func until(it map[string]types.AttributeValue) time.Time {
	if n, err := ddb.Int(it, "until"); err == nil {
		return time.Unix(n, 0)
	}
	return time.Time{}
}

// Disconnect forgets a connection with its subscriptions and the tools it registered. Calls
// already dispatched to it stay on their rows and time out unless another connection answers.
func (r *Registry) Disconnect(ctx context.Context, id string) error {
	out, err := r.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &r.table, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S(connKey(id))}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("loading connection %s: %w", id, err)
	}
	var keys []map[string]types.AttributeValue
	for _, it := range out.Items {
		sk := ddb.String(it, "sk")
		keys = append(keys, key(connKey(id), sk))
		if sk == "#" {
			if acc := ddb.String(it, "accountId"); acc != "" {
				keys = append(keys, key(accountKey(acc), connKey(id)))
			}
		} else if rt, ok := strings.CutPrefix(sk, "rt#"); ok {
			keys = append(keys, key("rt#"+rt, connKey(id)))
		}
	}
	for _, k := range keys {
		if _, err := r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &r.table, Key: k}); err != nil {
			return fmt.Errorf("forgetting connection %s: %w", id, err)
		}
	}
	return nil
}

// Subscribe makes connection c a subscriber of the runtime (accountID, conversationID) of
// agentID. tools replaces the tools c registered for it; nil keeps them.
func (r *Registry) Subscribe(ctx context.Context, c Connection, agentID, conversationID string, tools []ToolGroup, now time.Time) error {
	return r.subscribe(ctx, c, agentID, conversationID, tools, false, now)
}

// SubscribeForReplay is Subscribe for a connection that wants the runtime's running turn
// replayed: in the same write it is marked as waiting for that replay, so the turn's live
// output skips it until whoever replays the turn to it claims the mark (ClaimReplay).
func (r *Registry) SubscribeForReplay(ctx context.Context, c Connection, agentID, conversationID string, tools []ToolGroup, now time.Time) error {
	return r.subscribe(ctx, c, agentID, conversationID, tools, true, now)
}

func (r *Registry) subscribe(ctx context.Context, c Connection, agentID, conversationID string, tools []ToolGroup, replay bool, now time.Time) error {
	rk := runtimeKey(c.AccountID, conversationID)
	update := "SET agentId = :agent, channel = :channel, expiresAt = :exp"
	values := map[string]types.AttributeValue{":agent": ddb.S(agentID), ":channel": ddb.S(c.Channel), ":exp": expiry(now)}
	var names map[string]string
	if !c.Until.IsZero() {
		update += ", #until = :until" // UNTIL is a reserved word
		values[":until"], names = ddb.N(c.Until.Unix()), map[string]string{"#until": "until"}
	}
	if tools != nil {
		b, err := json.Marshal(tools)
		if err != nil {
			return err
		}
		update += ", tools = :tools"
		values[":tools"] = ddb.S(string(b))
	}
	if replay {
		update += ", replay = :replay"
		values[":replay"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if _, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(rk, connKey(c.ID)), UpdateExpression: &update, ExpressionAttributeValues: values,
		ExpressionAttributeNames: names,
	}); err != nil {
		return fmt.Errorf("subscribing connection %s: %w", c.ID, err)
	}
	back := key(connKey(c.ID), "rt#"+c.AccountID+"#"+conversationID)
	back["expiresAt"] = expiry(now)
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: back}); err != nil {
		return fmt.Errorf("subscribing connection %s: %w", c.ID, err)
	}
	if replay {
		// A turn running elsewhere looks at the run record often (for aborts); this tells it to
		// look at its subscribers now rather than at its next output.
		_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &r.table, Key: key(rk, "#run"),
			UpdateExpression:          aws.String("SET replayAsked = :t"),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": ddb.N(now.UnixNano())},
		})
		if err != nil && !ddb.ConditionFailed(err) {
			return fmt.Errorf("asking the run of %s for a replay: %w", conversationID, err)
		}
	}
	return nil
}

// ClaimReplay takes connection connID's replay mark on the runtime; ok is false when it has none
// (another claimed it first). Exactly one claimant replays the turn to the connection.
func (r *Registry) ClaimReplay(ctx context.Context, accountID, conversationID, connID string) (ok bool, err error) {
	_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), connKey(connID)),
		UpdateExpression: aws.String("REMOVE replay"), ConditionExpression: aws.String("attribute_exists(replay)"),
	})
	if ddb.ConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming the replay of connection %s: %w", connID, err)
	}
	return true, nil
}

// AwaitsReplay reports whether connection connID still waits for its replay on the runtime.
func (r *Registry) AwaitsReplay(ctx context.Context, accountID, conversationID, connID string) (bool, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), connKey(connID)),
		ProjectionExpression: aws.String("replay"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("reading the subscription of connection %s: %w", connID, err)
	}
	_, ok := out.Item["replay"]
	return ok, nil
}

// Subscribers lists the connections that receive a runtime's events: its subscribers, then the
// account's stream-channel connections that are not subscribers themselves.
func (r *Registry) Subscribers(ctx context.Context, accountID, conversationID string) ([]Subscriber, error) {
	var subs []Subscriber
	seen := map[string]bool{}
	for i, pk := range []string{runtimeKey(accountID, conversationID), accountKey(accountID)} {
		var start map[string]types.AttributeValue
		for {
			out, err := r.db.Query(ctx, &dynamodb.QueryInput{
				TableName: &r.table, KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :conn)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S(pk), ":conn": ddb.S("conn#")},
				ConsistentRead:            aws.Bool(true), ExclusiveStartKey: start,
			})
			if err != nil {
				return nil, fmt.Errorf("listing the subscribers of %s: %w", conversationID, err)
			}
			for _, it := range out.Items {
				id := strings.TrimPrefix(ddb.String(it, "sk"), "conn#")
				observer := i == 1
				if seen[id] || (observer && ddb.String(it, "channel") != Stream) {
					continue
				}
				seen[id] = true
				_, replay := it["replay"]
				sub := Subscriber{ConnectionID: id, Channel: ddb.String(it, "channel"), AgentID: ddb.String(it, "agentId"), Replay: replay, Observer: observer, Until: until(it)}
				if raw := ddb.String(it, "tools"); raw != "" {
					if err := json.Unmarshal([]byte(raw), &sub.Tools); err != nil {
						return nil, fmt.Errorf("tools of connection %s: %w", id, err)
					}
				}
				subs = append(subs, sub)
			}
			if start = out.LastEvaluatedKey; start == nil {
				break
			}
		}
	}
	return subs, nil
}

// SetRun records a runtime's latest run. It leaves an abort request in place: one asked for a
// queued run must still stop it once it starts, and one for an earlier run names another event.
func (r *Registry) SetRun(ctx context.Context, accountID, conversationID string, run Run) error {
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"),
		UpdateExpression:          aws.String("SET #run = :r, expiresAt = :x"),
		ExpressionAttributeNames:  map[string]string{"#run": "run"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": ddb.S(string(b)), ":x": expiry(run.UpdatedAt)},
	})
	if err != nil {
		return fmt.Errorf("recording the run of %s: %w", conversationID, err)
	}
	return nil
}

// Run reads a runtime's latest run; ok is false when it has none.
func (r *Registry) Run(ctx context.Context, accountID, conversationID string) (run Run, ok bool, err error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Run{}, false, fmt.Errorf("loading the run of %s: %w", conversationID, err)
	}
	raw := ddb.String(out.Item, "run")
	if raw == "" {
		return Run{}, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &run); err != nil {
		return Run{}, false, fmt.Errorf("the run of %s: %w", conversationID, err)
	}
	run.Unseen = ddb.String(out.Item, "unseen") == run.EventID
	return run, true, nil
}

// Unseen records that the end of run eventID reached no subscriber of the runtime.
func (r *Registry) Unseen(ctx context.Context, accountID, conversationID, eventID string) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"),
		UpdateExpression:          aws.String("SET unseen = :e"),
		ConditionExpression:       aws.String("attribute_not_exists(seen) OR seen <> :e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": ddb.S(eventID)},
	})
	if ddb.ConditionFailed(err) {
		return nil // a sync replayed it already
	}
	if err != nil {
		return fmt.Errorf("recording the run of %s as unseen: %w", conversationID, err)
	}
	return nil
}

// Seen records that the end of run eventID reached the runtime after all (a sync replayed it).
func (r *Registry) Seen(ctx context.Context, accountID, conversationID, eventID string) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"),
		UpdateExpression:          aws.String("SET seen = :e REMOVE unseen"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": ddb.S(eventID)},
	})
	if err != nil {
		return fmt.Errorf("recording the run of %s as seen: %w", conversationID, err)
	}
	return nil
}

// Abort asks the worker running eventID on the runtime to stop it.
func (r *Registry) Abort(ctx context.Context, accountID, conversationID, eventID string) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"),
		UpdateExpression:          aws.String("SET abortEvent = :e"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": ddb.S(eventID)},
	})
	if ddb.ConditionFailed(err) {
		return nil // no run to stop
	}
	if err != nil {
		return fmt.Errorf("aborting the run of %s: %w", conversationID, err)
	}
	return nil
}

// Signals is what the runtime's controllers asked of a running turn.
type Signals struct {
	// Aborted: abort_message asked to stop the run.
	Aborted bool
	// ReplayAsked changes each time a connection subscribes for a replay (SubscribeForReplay).
	ReplayAsked int64
}

// Signals reads what was asked of run eventID.
func (r *Registry) Signals(ctx context.Context, accountID, conversationID, eventID string) (Signals, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), "#run"),
		ProjectionExpression: aws.String("abortEvent, replayAsked"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Signals{}, fmt.Errorf("reading the run of %s: %w", conversationID, err)
	}
	asked, _ := ddb.Int(out.Item, "replayAsked")
	return Signals{Aborted: ddb.String(out.Item, "abortEvent") == eventID, ReplayAsked: asked}, nil
}

// Queued is an input accepted while the runtime was busy with another run, waiting for a
// worker to start it. It is the App Server's queue item.
type Queued struct {
	// ID is the run the input becomes (its event id).
	ID              string `json:"id"`
	ClientMessageID string `json:"client_message_id"`
	// Kind is "message" (create_message) or "approval_result" (approval_response).
	Kind       string    `json:"kind"`
	Source     string    `json:"source"`
	Content    string    `json:"content"`
	EnqueuedAt time.Time `json:"enqueued_at"`
}

func queueKey(eventID string) string { return "q#" + eventID }

// Enqueue records an input waiting for the runtime's current run to end.
func (r *Registry) Enqueue(ctx context.Context, accountID, conversationID string, q Queued) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	item := key(runtimeKey(accountID, conversationID), queueKey(q.ID))
	item["queued"], item["expiresAt"] = ddb.S(string(b)), expiry(q.EnqueuedAt)
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: item}); err != nil {
		return fmt.Errorf("queueing input %s of %s: %w", q.ID, conversationID, err)
	}
	return nil
}

// Dequeue removes the input of run eventID from the runtime's queue, once a worker starts it or
// drops it; removed is the input, when it was queued.
func (r *Registry) Dequeue(ctx context.Context, accountID, conversationID, eventID string) (removed *Queued, err error) {
	out, err := r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &r.table, Key: key(runtimeKey(accountID, conversationID), queueKey(eventID)),
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return nil, fmt.Errorf("dequeueing input %s of %s: %w", eventID, conversationID, err)
	}
	raw := ddb.String(out.Attributes, "queued")
	if raw == "" {
		return nil, nil
	}
	var q Queued
	if err := json.Unmarshal([]byte(raw), &q); err != nil {
		return nil, fmt.Errorf("queued input %s of %s: %w", eventID, conversationID, err)
	}
	return &q, nil
}

// Queue lists the runtime's queued inputs, oldest first.
func (r *Registry) Queue(ctx context.Context, accountID, conversationID string) ([]Queued, error) {
	var qs []Queued
	var start map[string]types.AttributeValue
	for {
		out, err := r.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &r.table, KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :q)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S(runtimeKey(accountID, conversationID)), ":q": ddb.S("q#")},
			ConsistentRead:            aws.Bool(true), ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the queue of %s: %w", conversationID, err)
		}
		for _, it := range out.Items {
			var q Queued
			if err := json.Unmarshal([]byte(ddb.String(it, "queued")), &q); err != nil {
				return nil, fmt.Errorf("queued input of %s: %w", conversationID, err)
			}
			qs = append(qs, q)
		}
		if start = out.LastEvaluatedKey; start == nil {
			break
		}
	}
	slices.SortStableFunc(qs, func(a, b Queued) int { return a.EnqueuedAt.Compare(b.EnqueuedAt) })
	return qs, nil
}

// Poster reaches open connections: API Gateway's @connections endpoint in AWS (wsconn.Poster),
// the sockets themselves in the local runner. An error wrapping wsconn.ErrGone means the
// connection has closed.
type Poster interface {
	Post(ctx context.Context, connectionID string, data []byte) error
	Disconnect(ctx context.Context, connectionID string) error
}

// Revoked is what a connection is told as the account's deletion or its secret's rotation ends
// its authority.
const Revoked = "the account was deleted or its secret rotated since this connection opened: it is closed; reconnect with a current secret"

// Revoke ends a connection whose authority ended with the account or its secret (End, saying
// Revoked).
func (r *Registry) Revoke(ctx context.Context, p Poster, id string) error {
	return r.End(ctx, p, id, Revoked)
}

// End ends a connection whose authority ended: it is told why in an App Server error frame,
// closed and forgotten. It is forgotten even when it could not be closed, so it gets nothing
// more and its next frame finds it unregistered.
func (r *Registry) End(ctx context.Context, p Poster, id, why string) error {
	ctx = context.WithoutCancel(ctx)
	frame, err := json.Marshal(map[string]string{"type": "error", "error": why})
	if err != nil {
		return err
	}
	var errs []error
	if err := p.Post(ctx, id, frame); err != nil && !errors.Is(err, wsconn.ErrGone) {
		errs = append(errs, fmt.Errorf("telling connection %s it is revoked: %w", id, err))
	}
	if err := p.Disconnect(ctx, id); err != nil && !errors.Is(err, wsconn.ErrGone) {
		errs = append(errs, fmt.Errorf("closing revoked connection %s: %w", id, err))
	}
	// $disconnect forgets it too, but API Gateway delivers that route on a best-effort basis: a
	// revoked connection must not stay subscribed meanwhile.
	if err := r.Disconnect(ctx, id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RevokeAccount revokes every connection of the account not opened with the secret whose hash
// is current (those of end-user tokens too: a rotation ends the tokens the harness signed); with
// current "" (the account is gone), every one. It goes on past a connection it
// fails on and returns every failure.
func (r *Registry) RevokeAccount(ctx context.Context, p Poster, accountID, current string) error {
	var errs []error
	pages := dynamodb.NewQueryPaginator(r.db, &dynamodb.QueryInput{
		TableName: &r.table, KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :conn)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S(accountKey(accountID)), ":conn": ddb.S("conn#")},
		ConsistentRead:            aws.Bool(true),
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("listing the connections of account %s: %w", accountID, err))...)
		}
		for _, it := range out.Items {
			id := strings.TrimPrefix(ddb.String(it, "sk"), "conn#")
			if current != "" {
				c, err := r.Connection(ctx, id)
				if errors.Is(err, ErrNotFound) {
					continue // closed meanwhile
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if c.SecretHash == current {
					continue
				}
			}
			errs = append(errs, r.Revoke(ctx, p, id))
		}
	}
	return errors.Join(errs...)
}
