package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// deepSeekV3Template is the sha256 of the Jinja chat_template in DeepSeek-V3's
// tokenizer_config.json, the one RenderChat implements. A tokenizer with any other
// template gets an error from RenderChat rather than a rendering that might differ.
const deepSeekV3Template = "3b8267e54b67df6500f231ffa969955cc9d26b3444a291ced4eb96ca7d3ca1ea"

// RenderChat renders msgs as DeepSeek-V3's chat template does, without a Jinja engine:
//
//	BOS + the system prompts (all of them, wherever they are, joined by "\n\n")
//	user:      <｜User｜>content
//	assistant: <｜Assistant｜>content<｜end▁of▁sentence｜>
//	           (after tool output: <｜tool▁outputs▁end｜>content<｜end▁of▁sentence｜>)
//	tool:      <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>content<｜tool▁output▁end｜> for the
//	           first tool message of the conversation, "\n<｜tool▁output▁begin｜>..." after it
//	end:       <｜tool▁outputs▁end｜> if the last message was a tool's, else <｜Assistant｜>
//	           when addGenerationPrompt
//
// The template also renders assistant tool calls (content None plus tool_calls), which a
// Message cannot express. Roles other than these four are an error (the template would
// drop them silently).
func (b *BPE) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	if b.chatTemplate == "" {
		return "", fmt.Errorf("tokenizer has no chat_template (tokenizer_config.json missing or without one)")
	}
	if sum := sha256.Sum256([]byte(b.chatTemplate)); hex.EncodeToString(sum[:]) != deepSeekV3Template {
		return "", fmt.Errorf("chat_template (sha256 %x) is not DeepSeek-V3's, the only one this package renders", sum)
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("chat message %d: role %q is not supported (want system, user, assistant or tool)", i, m.Role)
		}
	}
	bos := string(b.TokenBytes(b.bos))

	var sb strings.Builder
	sb.WriteString(bos)
	first := true
	for _, m := range msgs {
		if m.Role != "system" {
			continue
		}
		if !first {
			sb.WriteString("\n\n")
		}
		sb.WriteString(m.Content)
		first = false
	}
	// ns.is_tool: the previous message was a tool's. ns.is_output_first: no tool message
	// yet in the whole conversation (the template never resets it).
	isTool, outputFirst := false, true
	for _, m := range msgs {
		switch m.Role {
		case "user":
			isTool = false
			sb.WriteString("<｜User｜>" + m.Content)
		case "assistant":
			if isTool {
				sb.WriteString("<｜tool▁outputs▁end｜>" + m.Content + "<｜end▁of▁sentence｜>")
				isTool = false
			} else {
				sb.WriteString("<｜Assistant｜>" + m.Content + "<｜end▁of▁sentence｜>")
			}
		case "tool":
			isTool = true
			if outputFirst {
				sb.WriteString("<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" + m.Content + "<｜tool▁output▁end｜>")
				outputFirst = false
			} else {
				sb.WriteString("\n<｜tool▁output▁begin｜>" + m.Content + "<｜tool▁output▁end｜>")
			}
		}
	}
	if isTool {
		sb.WriteString("<｜tool▁outputs▁end｜>")
	}
	if addGenerationPrompt && !isTool {
		sb.WriteString("<｜Assistant｜>")
	}
	return sb.String(), nil
}

// EncodeChat implements Tokenizer: RenderChat, then Encode without adding BOS (the
// rendering starts with it), as HF's apply_chat_template(tokenize=True) does.
func (b *BPE) EncodeChat(msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	s, err := b.RenderChat(msgs, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return b.Encode(s, false), nil
}
