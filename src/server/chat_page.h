// The chat page `GET /` serves: one self-contained HTML document (no external assets) that
// keeps the conversation in the browser, sends it to /v1/chat/completions with stream: true,
// and shows the streamed reasoning (reasoning_content) apart from the answer. `/?q=TEXT` sends
// TEXT as the first message on load (a link that opens a conversation; the headless-browser test
// uses it); body[data-state] is "streaming" while a reply arrives and "done" after it.
#pragma once

#include <string_view>

namespace tessera {

inline constexpr std::string_view kChatPageHtml = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tessera chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:48rem;margin:0 auto;padding:1rem;background:#fafafa}
#log{display:flex;flex-direction:column;gap:.6rem;margin-bottom:1rem}
.msg{padding:.6rem .8rem;border-radius:.5rem;white-space:pre-wrap;word-wrap:break-word}
.user{background:#dbeafe;align-self:flex-end}
.assistant{background:#fff;border:1px solid #ddd}
.reasoning{color:#666;font-size:.9em;border-left:3px solid #ccc;padding-left:.5rem;margin-bottom:.4rem;white-space:pre-wrap}
.reasoning:empty{display:none}
.error{color:#b91c1c}
form{display:flex;gap:.5rem}
textarea{flex:1;min-height:3rem;font:inherit}
</style></head><body>
<h1>tessera</h1>
<div id="log"></div>
<form id="form"><textarea id="input" placeholder="Message"></textarea><button id="send" type="submit">Send</button></form>
<script>
const log = document.getElementById('log'), form = document.getElementById('form'), input = document.getElementById('input');
const history = [];
function bubble(role) {
  const div = document.createElement('div'); div.className = 'msg ' + role;
  const reasoning = document.createElement('div'); reasoning.className = 'reasoning';
  const content = document.createElement('div'); content.className = 'content';
  div.append(reasoning, content); log.append(div); return {reasoning, content};
}
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const text = input.value.trim(); if (!text) return;
  input.value = '';
  bubble('user').content.textContent = text;
  history.push({role: 'user', content: text});
  const out = bubble('assistant');
  let answer = '';
  document.body.dataset.state = 'streaming';
  try {
    const res = await fetch('/v1/chat/completions', {method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({messages: history, stream: true})});
    if (!res.ok) { const e = await res.json(); throw new Error(e.error ? e.error.message : res.statusText); }
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const {value, done} = await reader.read(); if (done) break;
      buffer += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const line = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6); if (data === '[DONE]') continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        for (const choice of chunk.choices || []) {
          const d = choice.delta || {};
          if (d.reasoning_content) out.reasoning.textContent += d.reasoning_content;
          if (d.content) { answer += d.content; out.content.textContent = answer; }
        }
      }
    }
    history.push({role: 'assistant', content: answer});
  } catch (e) {
    out.content.classList.add('error'); out.content.textContent = 'error: ' + e.message;
  }
  document.body.dataset.state = 'done';
});
const first = new URLSearchParams(location.search).get('q');
if (first) { input.value = first; form.requestSubmit(); }
</script></body></html>
)html";

}  // namespace tessera
