#!/usr/bin/env python3
"""weft-bench's prefix-caching workloads end to end, against weft-fake-serve
(the unit tests' fake engine, prefix caching on as in weft-serve):
--system-prompt N puts N more words before every prompt, which the
server's prefix cache then supplies; --turns N sends conversations whose
later turns carry the earlier ones and reports first- and last-turn TTFT.

    python3 test/server/bench_workloads.py WEFT-FAKE-SERVE TEMPLATE.jinja WEFT-BENCH
"""
import json
import subprocess
import sys
import tempfile


def bench(weft_bench, port, *args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run = subprocess.run([weft_bench, "--model", "fake", "--api-key", "test-key",
                              "--url", f"http://127.0.0.1:{port}", "--max-tokens", "4",
                              "--json", out.name, *args], capture_output=True, text=True)
        assert run.returncode == 0, (args, run.stdout, run.stderr)
        return json.load(open(out.name)), run.stdout


def main():
    server = subprocess.Popen([sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        weft_bench = sys.argv[3]
        common = ["--endpoint", "completions", "--users", "2", "--requests-per-user", "2"]
        plain, _ = bench(weft_bench, port, *common)
        shared, text = bench(weft_bench, port, *common, "--system-prompt", "200")
        p, s = plain["levels"][0], shared["levels"][0]
        assert shared["system_prompt_tokens"] == 200 and plain["system_prompt_tokens"] == 0
        # 200 more words a request, each at least one token.
        assert s["prompt_tokens"] >= p["prompt_tokens"] + 4 * 200, (p, s)
        # Every request after the first shares the system prompt's blocks.
        assert s["cached_prompt_tokens"] >= 3 * 150, s
        assert "from the server's prefix cache" in text, text

        conv, text = bench(weft_bench, port, "--endpoint", "chat", "--users", "2", "--turns", "3",
                           "--requests-per-user", "3")
        c = conv["levels"][0]
        assert conv["turns"] == 3 and c["requests"] == 6 and c["errors"] == 0, c
        assert c["ttft_p50_first_turn_seconds"] > 0 and c["ttft_p50_last_turn_seconds"] > 0, c
        # Later turns resend the conversation, which the cache supplies.
        assert c["cached_prompt_tokens"] > 0, c
        assert "TTFT p50: first turns" in text, text
        print("weft-bench workloads: ok")
    finally:
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
