package asynctools

import (
	"encoding/json"

	"github.com/agentharness/harness/shared/model"
)

// resultView is how one settled call is shown to the model.
type resultView struct {
	ResultID   string          `json:"resultId"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Status     string          `json:"status"`
	Response   json.RawMessage `json:"response,omitempty"`
	Error      string          `json:"error,omitempty"`
	// Truncated: Response is a preview of a larger result kept in blob storage.
	Truncated     bool `json:"truncated,omitempty"`
	ResponseBytes int  `json:"responseBytes,omitempty"`
}

// ResultsMessage is the message that brings settled async calls back to the model: a user-role
// message (every provider accepts one anywhere) of kind model.KindAsyncResults whose text is
// {"asyncToolResults":[{resultId, toolCallId, toolName, status, response | error}]}.
func ResultsMessage(id string, results []Result) model.Message {
	views := make([]resultView, 0, len(results))
	for _, r := range results {
		v := resultView{ResultID: r.ID, ToolCallID: r.ToolCallID, ToolName: r.ToolName, Status: r.Status}
		if r.Status == Completed {
			v.Response = r.Response
			if len(v.Response) == 0 {
				v.Response = json.RawMessage("null")
			}
			if r.ResponseKey != "" {
				v.Truncated, v.ResponseBytes = true, r.ResponseBytes
			}
		} else {
			v.Error = r.Error
		}
		views = append(views, v)
	}
	b, _ := json.Marshal(map[string]any{"asyncToolResults": views})
	return model.Message{ID: id, Role: model.RoleUser, Kind: model.KindAsyncResults, Parts: []model.Part{{Type: model.PartText, Text: string(b)}}}
}
