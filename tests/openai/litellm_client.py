"""litellm with Chela as an OpenAI-compatible provider: `openai/chela` at Chela's /v1.

Usage: litellm_client.py BASE_URL; the key is $CHELA_GATEWAY_TOKEN. Prints KEY=VALUE lines.
"""
import json
import os
import sys

# The model cost map is read from the package, not fetched: tests reach only loopback.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # noqa: E402

base, key = sys.argv[1], os.environ["CHELA_GATEWAY_TOKEN"]


def say(k, v):
    print(f"{k}={json.dumps(v)}", flush=True)


r = litellm.completion(model="openai/chela", api_base=base, api_key=key,
                       messages=[{"role": "user", "content": "hello from litellm"}])
say("CHAT", {"text": r.choices[0].message.content, "usage": [r.usage.prompt_tokens, r.usage.completion_tokens]})
text = []
for chunk in litellm.completion(model="openai/chela", api_base=base, api_key=key, stream=True,
                                messages=[{"role": "user", "content": "stream from litellm"}]):
    if chunk.choices and chunk.choices[0].delta.content:
        text.append(chunk.choices[0].delta.content)
say("STREAM", "".join(text))
try:
    litellm.completion(model="openai/chela", api_base=base, api_key=key, max_retries=0, n=2,
                       messages=[{"role": "user", "content": "x"}])
    say("ERR", None)
except litellm.BadRequestError as e:
    say("ERR", str(e))
