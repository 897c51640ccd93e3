"""The built-in tracks' flags of run, score and compare, written from their option models by
`python -m deskbench.cli.track_flags` (do not edit: tests/contract/test_track_typed_options.py checks it).
Read by cli/track_flags.py when no track is loaded, so `run --help` needs neither pydantic nor a track.
"""

from __future__ import annotations

from deskbench.contract.flags import FlagSpec

FLAGS: dict[str, dict[str, tuple[FlagSpec, ...]]] = {
    'run': {
        'docqa': (
            FlagSpec(param='command', flag='--command', kind='str', default=None, help="--agent external (every track): your agent's command, run once per task ({question} is replaced; the MCP server's URL is in $DESKBENCH_MCP_URL).", short=None, negative=None, preflight=False),
            FlagSpec(param='url', flag='--url', kind='str', default=None, help='--agent external (every track): your agent as a service, POSTed {task_id, question, mcp_url} once per task; it answers over MCP (instead of --command).', short=None, negative=None, preflight=False),
            FlagSpec(param='timeout', flag='--timeout', kind='float', default=None, help="--agent external (every track): an episode's wall-time limit in seconds (default 600); part of the run's configuration.", short=None, negative=None, preflight=False),
            FlagSpec(param='corpus', flag='--corpus', kind='path', default=None, help='Corpus directory (not needed by guess).', short='-c', negative=None, preflight=False),
            FlagSpec(param='limit', flag='--limit', kind='int', default=None, help='docqa and analytics: only the first N tasks (deliverables: --task).', short=None, negative=None, preflight=False),
            FlagSpec(param='max_steps', flag='--max-steps', kind='int', default=None, help="Iterations per episode (T); default: bm25-agent its preset's (official 5, paper 10), rlm 30 root iterations (the official RLM's).", short=None, negative=None, preflight=False),
            FlagSpec(param='max_sub_calls', flag='--max-sub-calls', kind='int', default=None, help='rlm: llm_query sub-calls per episode (default: no cap, as the official RLM).', short=None, negative=None, preflight=False),
            FlagSpec(param='top_k', flag='--top-k', kind='int', default=None, help="Pages per search (default: bm25-agent its preset's, official 4, paper 5; m3docrag, colbert-llm, mdocagent 1 per retrieval, MDocAgent's; the other agents 5).", short='-k', negative=None, preflight=False),
            FlagSpec(param='protocol', flag='--protocol', kind='str', default=None, help="bm25-agent's loop: official (the provider's official MADQA script: openai_agent.py, ...) | paper (Prompt 5, every provider) | a script's protocol by name (default: the preset's).", short=None, negative=None, preflight=False),
            FlagSpec(param='preset', flag='--preset', kind='str', default=None, help="bm25-agent's defaults: official (process_dataset.py: the official protocol, T=5, k=4; the default) | paper (Appendix G.1: Prompt 5 loop, T=10, k=5).", short=None, negative=None, preflight=False),
            FlagSpec(param='view', flag='--view', kind='str', default=None, help='Pages shown as image | text (default: image; text for a model without vision).', short=None, negative=None, preflight=False),
            FlagSpec(param='retriever', flag='--retriever', kind='str', default='bm25', help="What searches run on: bm25 (MADQA's Whoosh tool) | KIND=MODEL (`deskbench list retrievers`) | A+B fused by RRF (docs/retrievers.md).", short='-r', negative=None, preflight=False),
            FlagSpec(param='retriever_download', flag='--retriever-download', kind='switch', default=False, help='Let --retriever fetch a model missing here from the Hugging Face hub.', short=None, negative=None, preflight=False),
            FlagSpec(param='text_retriever', flag='--text-retriever', kind='str', default=None, help='colbert-llm, mdocagent: text retrieval SPEC (default colbert=colbert-ir/colbertv2.0).', short=None, negative=None, preflight=False),
            FlagSpec(param='image_retriever', flag='--image-retriever', kind='str', default=None, help='m3docrag, mdocagent: page-image retrieval SPEC (default colpali=vidore/colpali).', short=None, negative=None, preflight=False),
            FlagSpec(param='unsafe_local', flag='--unsafe-local', kind='switch', default=False, help='analytics and rlm: run model code without bubblewrap (unsafe; debugging only).', short=None, negative=None, preflight=False),
        ),
        'analytics': (
            FlagSpec(param='command', flag='--command', kind='str', default=None, help="--agent external (every track): your agent's command, run once per task ({question} is replaced; the MCP server's URL is in $DESKBENCH_MCP_URL).", short=None, negative=None, preflight=False),
            FlagSpec(param='url', flag='--url', kind='str', default=None, help='--agent external (every track): your agent as a service, POSTed {task_id, question, mcp_url} once per task; it answers over MCP (instead of --command).', short=None, negative=None, preflight=False),
            FlagSpec(param='timeout', flag='--timeout', kind='float', default=None, help="--agent external (every track): an episode's wall-time limit in seconds (default 600); part of the run's configuration.", short=None, negative=None, preflight=False),
            FlagSpec(param='limit', flag='--limit', kind='int', default=None, help='docqa and analytics: only the first N tasks (deliverables: --task).', short=None, negative=None, preflight=False),
            FlagSpec(param='max_rounds', flag='--max-rounds', kind='int', default=20, help='analytics and deliverables: execute_code calls per episode.', short=None, negative=None, preflight=False),
            FlagSpec(param='no_summary', flag='--no-summary', kind='switch', default=False, help="analytics: leave out the auxiliary spreadsheet summary (the paper's ablation).", short=None, negative=None, preflight=False),
            FlagSpec(param='last_round_note', flag='--last-round-note', kind='switch', default=False, help="analytics: the last execute_code result tells the model to answer now (not the paper's protocol; the system becomes analyst-agent[last-round-note]).", short=None, negative=None, preflight=False),
            FlagSpec(param='cjk_font_hint', flag='--cjk-font-hint', kind='switch', default=False, help="analytics: the tool description says CJK fonts are installed (not the paper's protocol; the system becomes analyst-agent[cjk-font-hint]).", short=None, negative=None, preflight=False),
            FlagSpec(param='unsafe_local', flag='--unsafe-local', kind='switch', default=False, help='analytics and rlm: run model code without bubblewrap (unsafe; debugging only).', short=None, negative=None, preflight=False),
            FlagSpec(param='chart_judge', flag='--chart-judge', kind='str', default=None, help='analytics: vision judge for charts (default: --judge).', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge', flag='--file-judge', kind='str', default=None, help='analytics: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge_all', flag='--file-judge-all', kind='pair', default=None, help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).", short=None, negative='--file-judge-deferred', preflight=False),
        ),
        'deliverables': (
            FlagSpec(param='command', flag='--command', kind='str', default=None, help="--agent external (every track): your agent's command, run once per task ({question} is replaced; the MCP server's URL is in $DESKBENCH_MCP_URL).", short=None, negative=None, preflight=False),
            FlagSpec(param='url', flag='--url', kind='str', default=None, help='--agent external (every track): your agent as a service, POSTed {task_id, question, mcp_url} once per task; it answers over MCP (instead of --command).', short=None, negative=None, preflight=False),
            FlagSpec(param='timeout', flag='--timeout', kind='float', default=None, help="--agent external (every track): an episode's wall-time limit in seconds (default 600); part of the run's configuration.", short=None, negative=None, preflight=False),
            FlagSpec(param='max_rounds', flag='--max-rounds', kind='int', default=20, help='analytics and deliverables: execute_code calls per episode.', short=None, negative=None, preflight=False),
            FlagSpec(param='unsafe_local', flag='--unsafe-local', kind='switch', default=False, help='analytics and rlm: run model code without bubblewrap (unsafe; debugging only).', short=None, negative=None, preflight=False),
            FlagSpec(param='only_task', flag='--task', kind='strs', default=None, help='deliverables: run only these package ids (repeat).', short=None, negative=None, preflight=False),
            FlagSpec(param='only_system', flag='--system', kind='strs', default=None, help='deliverables: run only these systems (agent:model as stored; repeat).', short=None, negative=None, preflight=False),
            FlagSpec(param='rerun', flag='--rerun', kind='switch', default=False, help='deliverables: run the selected episodes again, replacing the stored ones (others are kept).', short=None, negative=None, preflight=False),
            FlagSpec(param='inline_chars', flag='--inline-chars', kind='int', default=24000, help='deliverables: characters of normalised input text put in the prompt.', short=None, negative=None, preflight=False),
            FlagSpec(param='trap_hints', flag='--trap-hints', kind='switch', default=False, help="deliverables: the prompt names the trap kinds (footnotes, units, weighting...): not the paper's prompt; the system becomes deliverable-agent[trap-hints].", short=None, negative=None, preflight=False),
            FlagSpec(param='web', flag='--web', kind='str', default=None, help='deliverables: web tools: recorded:DIR (offline) or brave (key in $BRAVE_SEARCH_API_KEY).', short=None, negative=None, preflight=False),
            FlagSpec(param='web_record', flag='--web-record', kind='path', default=None, help="deliverables: save a live --web's pages to DIR.", short=None, negative=None, preflight=False),
            FlagSpec(param='deny_url', flag='--deny-url', kind='strs', default=None, help='deliverables: also deny URL PATTERN/@FILE.', short=None, negative=None, preflight=False),
            FlagSpec(param='allow_peeking', flag='--allow-peeking', kind='switch', default=False, help='deliverables: let web agents see the benchmark.', short=None, negative=None, preflight=False),
        ),
    },
    'score': {
        'docqa': (
            FlagSpec(param='tasks', flag='--tasks', kind='path', default=None, help='Tasks JSONL (MADQA dataset rows); a run knows its own.', short='-t', negative=None, preflight=False),
            FlagSpec(param='pool_humans', flag='--pool-humans', kind='switch', default=False, help="docqa run: one 'human' row for every annotator's human:NAME episodes (earliest answer per question).", short=None, negative=None, preflight=False),
            FlagSpec(param='by', flag='--by', kind='strs', default=None, help='Also break down by: domain, category.', short=None, negative=None, preflight=False),
            FlagSpec(param='official', flag='--official', kind='pair', default=False, help="The official MADQA evaluator's numbers (docs/fidelity.md): tasks without a prediction not counted, error rows and failed judge calls 0, Kuiper on len(search_history) else iterations (effort > 0, file order), pages as written, the official interval; adds 'official_metrics' to --json.", short=None, negative='--no-official', preflight=False),
            FlagSpec(param='kuiper_ties', flag='--kuiper-ties', kind='str', default='robust', help='robust (tied efforts are one block) | stable (input order)', short=None, negative=None, preflight=False),
            FlagSpec(param='effort', flag='--effort', kind='str', default='steps', help='Effort for Kuiper: steps | tokens | seconds', short=None, negative=None, preflight=False),
            FlagSpec(param='skip_invalid', flag='--skip-invalid', kind='pair', default=False, help='Skip (and count) bad lines instead of stopping.', short=None, negative='--no-skip-invalid', preflight=False),
            FlagSpec(param='judge_cache', flag='--judge-cache', kind='path', default=None, help="Judge response cache, a SQLite file (default: deskbench's shared response cache).", short=None, negative=None, preflight=False),
            FlagSpec(param='cache', flag='--cache', kind='pair', default=True, help='Reuse and store judge responses in the judge cache.', short=None, negative='--no-cache', preflight=False),
            FlagSpec(param='q0', flag='--q0', kind='float', default=None, help='Judge specificity, for bias correction [default: 1.0].', short=None, negative=None, preflight=False),
            FlagSpec(param='q1', flag='--q1', kind='float', default=None, help='Judge sensitivity, for bias correction [default: 0.98].', short=None, negative=None, preflight=False),
            FlagSpec(param='m0', flag='--m0', kind='int', default=None, help='Calibration items judged incorrect by humans [default: 48].', short=None, negative=None, preflight=False),
            FlagSpec(param='m1', flag='--m1', kind='int', default=None, help='Calibration items judged correct by humans [default: 152].', short=None, negative=None, preflight=False),
            FlagSpec(param='judge_calibration', flag='--judge-calibration', kind='path', default=None, help="q0, q1, m0, m1 from 'deskbench calibrate compute --json' output.", short=None, negative=None, preflight=False),
        ),
        'analytics': (
            FlagSpec(param='chart_judge', flag='--chart-judge', kind='str', default=None, help='analytics runs: vision judge for charts (default: --judge).', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge', flag='--file-judge', kind='str', default=None, help='analytics runs: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge_all', flag='--file-judge-all', kind='pair', default=None, help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).", short=None, negative='--file-judge-deferred', preflight=False),
        ),
        'deliverables': (
            FlagSpec(param='reviewed_only', flag='--reviewed-only', kind='switch', default=False, help="deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix C); by default every usable grade counts and the share reviewed is shown.", short=None, negative=None, preflight=False),
        ),
    },
    'compare': {
        'docqa': (
            FlagSpec(param='judge_cache', flag='--judge-cache', kind='path', default=None, help="Judge response cache, a SQLite file (default: deskbench's shared response cache).", short=None, negative=None, preflight=False),
            FlagSpec(param='cache', flag='--cache', kind='pair', default=True, help='Reuse and store judge responses in the judge cache.', short=None, negative='--no-cache', preflight=False),
        ),
        'analytics': (
            FlagSpec(param='chart_judge', flag='--chart-judge', kind='str', default=None, help='analytics: vision judge for charts (default: --judge).', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge', flag='--file-judge', kind='str', default=None, help='analytics: the agentic File Judge model (AIDABench Listing 5); off by default: the spreadsheet comparator decides.', short=None, negative=None, preflight=True),
            FlagSpec(param='file_judge_all', flag='--file-judge-all', kind='pair', default=None, help="analytics: with --file-judge, every output file goes to the File Judge (the paper's protocol; the default) | only files the comparator cannot read.", short=None, negative='--file-judge-deferred', preflight=False),
        ),
        'deliverables': (
            FlagSpec(param='reviewed_only', flag='--reviewed-only', kind='switch', default=False, help='deliverables: only QC-reviewed rubric grades count (others unscored).', short=None, negative=None, preflight=False),
        ),
    },
}
