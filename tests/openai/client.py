"""Drives Chela's OpenAI-compatible endpoint with the official `openai` SDK, as a script would.

Usage: client.py BASE_URL [format] (e.g. http://127.0.0.1:18789/v1); the key is $CHELA_GATEWAY_TOKEN.
With `format`, only the structured-answer requests are made (for a daemon whose provider speaks
OpenAI's wire, which takes `response_format`).
Prints KEY=VALUE lines (values are JSON) for the Rust test to check; the fake model's script
decides the answers, in the order the calls are made here.
"""
import json
import os
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=os.environ["CHELA_GATEWAY_TOKEN"], max_retries=0)


def say(key, value):
    print(f"{key}={json.dumps(value)}", flush=True)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

if sys.argv[2:] == ["format"]:
    # The SDK's own types for a structured answer, asked in both APIs.
    r = client.chat.completions.create(model="chela", response_format={"type": "json_object"},
                                       messages=[{"role": "user", "content": "a JSON object please"}])
    say("FORMAT_OBJECT", json.loads(r.choices[0].message.content))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    r = client.chat.completions.create(
        model="chela", messages=[{"role": "user", "content": "count"}],
        response_format={"type": "json_schema", "json_schema": {"name": "count", "schema": schema, "strict": True}})
    say("FORMAT_SCHEMA", json.loads(r.choices[0].message.content))
    r = client.responses.create(model="chela", input="count again",
                                text={"format": {"type": "json_schema", "name": "count", "schema": schema,
                                                 "strict": True}})
    say("FORMAT_RESPONSES", json.loads(r.output_text))
    sys.exit(0)

say("MODELS", [m.id for m in client.models.list()])

# A whole answer, stateless: the system message and earlier turns are the client's.
r = client.chat.completions.create(
    model="chela",
    messages=[
        {"role": "system", "content": "Answer like a pirate."},
        {"role": "user", "content": "hello from the openai sdk"},
    ],
)
say("CHAT", {"text": r.choices[0].message.content, "finish": r.choices[0].finish_reason,
             "usage": [r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens]})

# Streamed, with the usage chunk.
text, usage, finish = [], None, None
for chunk in client.chat.completions.create(
    model="chela", stream=True, stream_options={"include_usage": True},
    messages=[{"role": "user", "content": "stream please"}],
):
    if chunk.usage is not None:
        usage = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.total_tokens]
    for c in chunk.choices:
        if c.delta.content:
            text.append(c.delta.content)
        if c.finish_reason:
            finish = c.finish_reason
say("STREAM", {"text": "".join(text), "finish": finish, "usage": usage})

# The client's tool: called by the model, run here, its result sent back.
messages = [{"role": "user", "content": "weather in Paris?"}]
r = client.chat.completions.create(model="chela", messages=messages, tools=[WEATHER])
call = r.choices[0].message.tool_calls[0]
say("TOOL_CALL", {"finish": r.choices[0].finish_reason, "name": call.function.name,
                  "args": json.loads(call.function.arguments)})
messages.append(r.choices[0].message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
r = client.chat.completions.create(model="chela", messages=messages, tools=[WEATHER])
say("TOOL_ANSWER", {"text": r.choices[0].message.content, "finish": r.choices[0].finish_reason})

# Refusals: the SDK's exceptions carry Chela's sentence.
def refused(**kw):
    try:
        client.chat.completions.create(**kw)
    except openai.APIStatusError as e:
        return {"class": type(e).__name__, "status": e.status_code, "message": e.message,
                "code": getattr(e, "code", None), "param": getattr(e, "param", None)}
    return None


say("ERR_N", refused(model="chela", n=2, messages=[{"role": "user", "content": "x"}]))
say("ERR_MODEL", refused(model="gpt-4o", messages=[{"role": "user", "content": "x"}]))
say("ERR_ROLE", refused(model="chela", messages=[{"role": "wizard", "content": "x"}]))
say("ERR_TOOL_ID", refused(model="chela", messages=[
    {"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_nobody", "content": "r"}]))
say("ERR_FORMAT", refused(model="chela", response_format={"type": "json_object"},
                          messages=[{"role": "user", "content": "x"}]))
say("ERR_HUGE", refused(model="chela", messages=[{"role": "user", "content": "x"}] * 3000))
say("ERR_NESTED", refused(model="chela", messages=[
    {"role": "user", "content": [{"type": "text", "text": {"type": "text", "text": "deeper"}}]}]))

# The Responses API, whole and streamed.
r = client.responses.create(model="chela", instructions="Be brief.", input="hello from responses")
say("RESPONSES", {"text": r.output_text, "status": r.status,
                  "usage": [r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens]})
with client.responses.stream(model="chela", input="stream a response") as stream:
    deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
    final = stream.get_final_response()
say("RESPONSES_STREAM", {"deltas": "".join(deltas), "text": final.output_text, "status": final.status})
tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
r = client.responses.create(model="chela", input="weather in Rome?", tools=tools)
calls = [o for o in r.output if o.type == "function_call"]
say("RESPONSES_CALL", {"name": calls[0].name, "args": json.loads(calls[0].arguments)})
r = client.responses.create(model="chela", tools=tools, input=[
    {"role": "user", "content": "weather in Rome?"},
    {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather", "arguments": calls[0].arguments},
    {"type": "function_call_output", "call_id": calls[0].call_id, "output": "warm"},
])
say("RESPONSES_TOOL_ANSWER", r.output_text)
try:
    client.responses.create(model="chela", input="x", previous_response_id="resp_old")
    say("RESPONSES_ERR", None)
except openai.BadRequestError as e:
    say("RESPONSES_ERR", e.message)
