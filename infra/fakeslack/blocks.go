package fakeslack

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The Block Kit limits the harness's blocks could reach.
const (
	maxSectionText  = 3000
	maxContextItems = 10
	maxButtonText   = 75
	maxButtonValue  = 2000
)

type wireBlock struct {
	Type     string            `json:"type"`
	Text     *wireText         `json:"text"`
	Elements []json.RawMessage `json:"elements"`
}

type wireText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireButton struct {
	Type     string    `json:"type"`
	Text     *wireText `json:"text"`
	ActionID string    `json:"action_id"`
	Value    string    `json:"value"`
	Style    string    `json:"style"`
}

// checkBlocks checks the blocks the harness posts (section, context, actions with buttons)
// against Slack's rules; other block types pass unchecked.
func checkBlocks(raw json.RawMessage) error {
	var blocks []wireBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return fmt.Errorf("blocks are not a list of blocks: %v", err)
	}
	if len(blocks) > maxBlocks {
		return fmt.Errorf("%d blocks, more than %d", len(blocks), maxBlocks)
	}
	for i, b := range blocks {
		if err := checkBlock(b); err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}

func checkBlock(b wireBlock) error {
	switch b.Type {
	case "":
		return errors.New("no type")
	case "section":
		if b.Text == nil {
			return errors.New("a section without text")
		}
		return checkText(*b.Text, maxSectionText)
	case "context":
		return checkElements(b.Elements, maxContextItems, func(t wireText) error { return checkText(t, maxSectionText) })
	case "actions":
		return checkElements(b.Elements, maxElements, checkButton)
	}
	return nil
}

// checkElements checks a block has 1 to most elements, each decoded as T and passing check.
func checkElements[T any](elements []json.RawMessage, most int, check func(T) error) error {
	if len(elements) == 0 || len(elements) > most {
		return fmt.Errorf("%d elements, want 1 to %d", len(elements), most)
	}
	for i, raw := range elements {
		var e T
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("element %d: %v", i, err)
		}
		if err := check(e); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

func checkText(t wireText, limit int) error {
	switch {
	case t.Type != "mrkdwn" && t.Type != "plain_text":
		return fmt.Errorf("text type %q is not mrkdwn or plain_text", t.Type)
	case t.Text == "":
		return errors.New("empty text")
	case utf8.RuneCountInString(t.Text) > limit:
		return fmt.Errorf("text of %d characters, more than %d", utf8.RuneCountInString(t.Text), limit)
	}
	return nil
}

func checkButton(e wireButton) error {
	switch {
	case e.Type != "button":
		return nil // the harness posts no other element
	case e.Text == nil || e.Text.Type != "plain_text":
		return errors.New("a button's text must be plain_text")
	case e.ActionID == "" || len(e.ActionID) > maxActionID:
		return fmt.Errorf("a button needs an action_id of 1 to %d characters", maxActionID)
	case utf8.RuneCountInString(e.Value) > maxButtonValue:
		return fmt.Errorf("a button value of %d characters, more than %d", utf8.RuneCountInString(e.Value), maxButtonValue)
	case e.Style != "" && e.Style != "primary" && e.Style != "danger":
		return fmt.Errorf("button style %q is not primary or danger", e.Style)
	}
	return checkText(*e.Text, maxButtonText)
}
