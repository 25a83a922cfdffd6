#!/usr/bin/env python3
"""n-gram speculation on the shipped trained models (docs/BENCHMARKS.md, "Speculation on real text"):
greedy decoding of 128 tokens from three prompts, with and without --spec ngram, 5 runs each,
median decode tokens/s, the speculation counters of the last run, and whether both outputs are
identical. Needs only the standard library and build/tessera. Usage: python3 tools/bench_spec_real_text.py"""
import json, os, statistics, subprocess
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
block = "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__, self.name)\n\n    def __eq__(self, other):\n        return self.name == other.name\n"
copying = "class A:\n" + block + "\n\nclass B:\n" + block + "\n\nclass C:\n"
with open(os.path.join(ROOT, 'tests/data/trained/heldout_sample.txt')) as f: held=f.read()
quote = held[12000:13500]
requote = "# The block below:\n" + quote + "\n# The same block again:\n" + quote[:200]
plain = "import sys\n\n\ndef main():\n"
prompts={"copying (class methods twice)":copying, "re-emitting a quoted block":requote, "no copying":plain}
for m in ["tiny-gpt-oss","tiny-llama"]:
  for name,p in prompts.items():
    res={}
    for spec in ["none","ngram"]:
      rates=[]
      for rep in range(5):
        out=subprocess.run(["build/tessera","generate","-m","models/"+m,"--raw","-p",p,"-n","128","--temp","0","--spec",spec,"--json","-t","2"],capture_output=True,text=True,cwd=ROOT)
        j=json.loads(out.stdout)
        rates.append(j["timings"]["decode_tok_s"])
      res[spec]=(j, statistics.median(rates))
    same = res["none"][0]["tokens"]==res["ngram"][0]["tokens"]
    s=res["ngram"][0]["spec"]
    print(f"| {m} | {name} | {res['none'][1]:.0f} | {res['ngram'][1]:.0f} | {res['ngram'][1]/res['none'][1]:.2f} | {s['proposed']} | {s['acceptance_rate']:.2f} | {s['mean_accepted_len']:.2f} | {s['verify_steps']} / {s['decode_steps']} | {same} |")
