#!/usr/bin/env python3
"""weft-serve's HTTP layer with the official `openai` Python client as the
client: models, completions and chat completions, streamed and not, usage,
stop strings, the API key and error types. The server is weft-fake-serve
(the unit tests' fake engine).

    python3 test/server/openai_client.py build/test/server/weft-fake-serve TEMPLATE.jinja
Exits 77 (skipped) when the openai package is not installed.
"""
import subprocess
import sys

try:
    import openai
except ImportError:
    print("the openai package is not installed: skipped")
    sys.exit(77)


def main():
    server = subprocess.Popen([sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key",
                               max_retries=0)
        assert [m.id for m in client.models.list().data] == ["fake"]

        c = client.completions.create(model="fake", prompt="Hello", max_tokens=8, temperature=0)
        text = c.choices[0].text
        assert len(text) == 8 and c.choices[0].finish_reason == "length", c
        assert c.usage.completion_tokens == 8 and c.usage.prompt_tokens > 0

        streamed = "".join(ch.choices[0].text for ch in client.completions.create(
            model="fake", prompt="Hello", max_tokens=8, temperature=0, stream=True)
            if ch.choices)
        assert streamed == text, (streamed, text)

        stop = text[3:5]
        s = client.completions.create(model="fake", prompt="Hello", max_tokens=8,
                                      temperature=0, stop=[stop])
        assert s.choices[0].text == text[:text.find(stop)] and s.choices[0].finish_reason == "stop"

        chat = client.chat.completions.create(
            model="fake", messages=[{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}],
            max_tokens=6, temperature=0)
        answer = chat.choices[0].message.content
        assert chat.choices[0].message.role == "assistant" and len(answer) == 6, chat
        chunks = list(client.chat.completions.create(
            model="fake", messages=[{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}],
            max_tokens=6, temperature=0, stream=True, stream_options={"include_usage": True}))
        assert chunks[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == answer
        assert chunks[-1].usage.completion_tokens == 6

        # Log-probabilities, as the client's own types read them.
        lp = client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
            temperature=0, logprobs=True, top_logprobs=3)
        entries = lp.choices[0].logprobs.content
        assert len(entries) == 5 and "".join(e.token for e in entries) == lp.choices[0].message.content
        assert all(len(e.top_logprobs) == 3 and e.logprob <= 0 and
                   e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob for e in entries)
        legacy = client.completions.create(model="fake", prompt="Hello", max_tokens=4,
                                           temperature=0, logprobs=2)
        assert len(legacy.choices[0].logprobs.tokens) == 4
        assert len(legacy.choices[0].logprobs.top_logprobs[0]) == 2

        try:
            client.completions.create(model="gpt-4", prompt="x", max_tokens=2)
            raise AssertionError("an unknown model was accepted")
        except openai.BadRequestError as e:
            assert "gpt-4" in str(e)
        try:
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong",
                          max_retries=0).models.list()
            raise AssertionError("a wrong key was accepted")
        except openai.AuthenticationError:
            pass
        print("openai client: models, completions, chat, streams, stop, logprobs, errors: ok")
    finally:
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
