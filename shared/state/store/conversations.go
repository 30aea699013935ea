package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A conversation belongs to its account and, when an end-user token started it, to that end
// user (endUser on its head). Its head's ownerKey keys the index ByOwner: rootOwner for a
// client's conversation (an end user's, or the account's own), childOwner for a subagent's,
// under the conversation that called it. A client's conversation is listed newest first:
// every append sets its head's updatedAt, the sort key of ByOwner and of ByAccountUpdated
// (all of an account's client conversations, keyed by listAccount, which subagents' heads do
// not carry), with its title (the first user message, shortened, unless one was set), its
// preview (the last message's text) and createdAt. A conversation made before these attributes
// were is listed from its next turn on.
const (
	byOwner          = "ByOwner"
	byAccountUpdated = "ByAccountUpdated"
	// TitleRunes and PreviewRunes bound a conversation's title and preview.
	TitleRunes   = 80
	PreviewRunes = 200
)

// ConversationInfo is a conversation as its list shows it.
type ConversationInfo struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agentId"`
	EndUser   string    `json:"endUser,omitempty"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Preview   string    `json:"lastMessagePreview"`
	// Parent is the conversation a subagent conversation was started from; empty for a
	// client's.
	Parent string `json:"-"`
}

func infoFrom(accountID string, it map[string]types.AttributeValue) ConversationInfo {
	ms := func(k string) time.Time {
		if n, err := ddb.Int(it, k); err == nil {
			return time.UnixMilli(n).UTC()
		}
		return time.Time{}
	}
	return ConversationInfo{
		ID: strings.TrimPrefix(ddb.String(it, "conversationKey"), accountID+"#"), AgentID: ddb.String(it, "agentId"),
		EndUser: ddb.String(it, "endUser"), Title: ddb.String(it, "title"), Preview: ddb.String(it, "preview"),
		CreatedAt: ms("createdAt"), UpdatedAt: ms("updatedAt"), Parent: ddb.String(it, "parentConversation"),
	}
}

// Conversation reads a conversation's head as its list shows it, or ErrNotFound.
func (s *Store) Conversation(ctx context.Context, accountID, conversationID string) (ConversationInfo, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return ConversationInfo{}, fmt.Errorf("loading conversation %s: %w", conversationID, err)
	}
	if out.Item == nil {
		return ConversationInfo{}, ErrNotFound
	}
	return infoFrom(accountID, out.Item), nil
}

// ConversationQuery selects the conversations ListConversations returns: an end user's (All
// false; EndUser "" is the account's own, made with its secret) or all of the account's, of
// one agent or any, Limit of them after Cursor.
type ConversationQuery struct {
	EndUser string
	All     bool
	AgentID string
	Limit   int
	Cursor  string
}

// ErrBadCursor: a cursor ListConversations did not make for this query.
var ErrBadCursor = errors.New("the cursor is not one this list gave")

// listCursor is where a page of a list ended: the last conversation's key and updatedAt.
type listCursor struct {
	Key     string `json:"k"`
	Updated int64  `json:"u"`
}

// ListConversations returns the conversations q selects, newest first, and the cursor of the
// next page ("" after the last).
func (s *Store) ListConversations(ctx context.Context, accountID string, q ConversationQuery) ([]ConversationInfo, string, error) {
	index, hash, hashValue, filter := byOwner, "ownerKey", rootOwner(accountID, q.EndUser), []string(nil)
	if q.All {
		index, hash, hashValue = byAccountUpdated, "listAccount", accountID
	}
	vals := map[string]types.AttributeValue{":h": ddb.S(hashValue)}
	if q.AgentID != "" {
		filter, vals[":agent"] = append(filter, "agentId = :agent"), ddb.S(q.AgentID)
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Conversations,
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String(hash + " = :h"),
		ExpressionAttributeValues: vals,
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(q.Limit)),
	}
	if filter != nil {
		in.FilterExpression = aws.String(strings.Join(filter, " AND "))
	}
	if q.Cursor != "" {
		var c listCursor
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || json.Unmarshal(b, &c) != nil || !strings.HasPrefix(c.Key, accountID+"#") {
			return nil, "", ErrBadCursor
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			"conversationKey": ddb.S(c.Key), "seq": ddb.N(0), "updatedAt": ddb.N(c.Updated), hash: ddb.S(hashValue),
		}
	}
	var list []ConversationInfo
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("listing conversations: %w", err)
		}
		for _, it := range out.Items {
			list = append(list, infoFrom(accountID, it))
			if len(list) == q.Limit {
				return list, CursorAfter(accountID, list[len(list)-1]), nil
			}
		}
		if out.LastEvaluatedKey == nil {
			return list, "", nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// CursorAfter is the cursor of the page that goes on after conversation c, as listed: a client
// that pages by the last conversation's id (Letta's after) gets it from that conversation.
func CursorAfter(accountID string, c ConversationInfo) string {
	b, _ := json.Marshal(listCursor{Key: accountID + "#" + c.ID, Updated: c.UpdatedAt.UnixMilli()})
	return base64.RawURLEncoding.EncodeToString(b)
}

// rootOwner is ByOwner's key of the client conversations of an end user (empty: the account's
// own), childOwner of the subagent conversations a conversation called. An account id holds
// neither # nor /, so neither meets the other.
func rootOwner(accountID, endUser string) string { return accountID + "#" + endUser }

func childOwner(accountID, parent string) string { return accountID + "/" + parent }

// SetTitle sets a conversation's title, or fails with ErrNotFound.
func (s *Store) SetTitle(ctx context.Context, accountID, conversationID, title string) (ConversationInfo, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("SET title = :t"),
		ConditionExpression:       aws.String("attribute_exists(conversationKey)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": ddb.S(title)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if ddb.ConditionFailed(err) {
		return ConversationInfo{}, ErrNotFound
	}
	if err != nil {
		return ConversationInfo{}, fmt.Errorf("titling conversation %s: %w", conversationID, err)
	}
	return infoFrom(accountID, out.Attributes), nil
}

// Shorten is text on one line, its runs of spaces made one, cut to at most n runes.
func Shorten(text string, n int) string {
	text = strings.Join(strings.FieldsFunc(text, unicode.IsSpace), " ")
	if r := []rune(text); len(r) > n {
		return strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return text
}

// listing is what an append of msgs to a client conversation of endUser sets on its head for
// its list (the clause to join a SET with, and its values): its owner key and listAccount,
// updatedAt, createdAt and title unless set, and the preview, from the last message with text.
func listing(accountID, endUser string, msgs []model.Message, now time.Time) (string, map[string]types.AttributeValue) {
	clause := "ownerKey = if_not_exists(ownerKey, :ownerKey), listAccount = :listAccount, " +
		"updatedAt = :updatedAt, createdAt = if_not_exists(createdAt, :updatedAt)"
	vals := map[string]types.AttributeValue{
		":ownerKey": ddb.S(rootOwner(accountID, endUser)), ":listAccount": ddb.S(accountID), ":updatedAt": ddb.N(now.UnixMilli()),
	}
	for _, m := range msgs {
		if t := Shorten(m.Text(), TitleRunes); m.Role == model.RoleUser && !m.IsNested() && !m.IsSummary() && t != "" {
			clause += ", title = if_not_exists(title, :title)"
			vals[":title"] = ddb.S(t)
			break
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if p := Shorten(msgs[i].Text(), PreviewRunes); !msgs[i].IsNested() && !msgs[i].IsSummary() && p != "" && msgs[i].Role != model.RoleTool {
			clause += ", preview = :preview"
			vals[":preview"] = ddb.S(p)
			break
		}
	}
	return clause, vals
}
