#!/usr/bin/env python3
"""compare.py SWEEP.csv [--also NAME=DIR ...]: measured against predicted time
for the size sweep of model-check.sh. For every collective type and timing it
prints each size's measured time (every run) beside the prediction the
programs embed (the topology calibrated in the same job), and the largest
relative error at 1 MiB or more. --also NAME=DIR adds the predictions of the
programs in DIR (sweep.sh or prepare.sh exported with another topology, e.g.
the default). Corpus rows (CORPUS=1) come first, one line per plan.
--markdown prints the tables as Markdown."""
import argparse
import collections
import csv
import json
import os
import re


def predictions(d):
    """plan name -> predicted seconds per step, read from exported programs."""
    out = {}
    for f in os.listdir(d):
        if f.endswith(".py"):
            m = re.search(r"^PREDICTED = (\[.*\])$", open(os.path.join(d, f)).read(), re.M)
            if m:
                out[f[:-3]] = json.loads(m.group(1))
    return out


def plan_devices(path):
    """The devices of the plan an exported program embeds."""
    src = open(path).read()
    start = "json.loads(r'''"
    plan = json.loads(src[src.index(start) + len(start):src.index("''')")])
    return sorted({d for m in plan["meshes"].values() for d in m["devices"]})


def corpus_table(rows, also, md):
    """One line per corpus plan: steps, result, total measured and predicted."""
    plans = collections.OrderedDict()
    for r in rows:
        plans.setdefault(r["plan"], []).append(r)
    head = ["plan", "devices", "steps", "result", "measured (us)", "predicted, calibrated (us)"]
    head += ["predicted, %s (us)" % n for n, _, _ in also]
    print("\ncorpus (%s)\n" % rows[0]["timing"])
    print(("| " if md else "") + (" | " if md else "  ").join(head) + (" |" if md else ""))
    if md:
        print("|" + "---|" * len(head))
    for name, steps in plans.items():
        devs = "-"
        for _, _, d in also:
            if os.path.exists(os.path.join(d, name + ".py")):
                devs = ",".join(map(str, plan_devices(os.path.join(d, name + ".py"))))
        line = ["`%s`" % name if md else name, devs, ", ".join(r["type"] for r in steps),
                "PASS" if all(r["pass"] == "true" for r in steps) else "FAIL",
                "%.1f" % (1e6 * sum(float(r["measured_s"]) for r in steps)),
                "%.1f" % (1e6 * sum(float(r["predicted_s"]) for r in steps))]
        for _, preds, _ in also:
            line.append("%.1f" % (1e6 * sum(preds[name])) if name in preds else "-")
        print(("| " if md else "") + (" | " if md else "  ").join(line) + (" |" if md else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    also = [(n, predictions(d), d) for n, d in (a.split("=", 1) for a in args.also)]
    rows = collections.defaultdict(dict)  # (timing, plan, step) -> {run: measured, "pred": p}
    records = list(csv.DictReader(open(args.csv)))
    corpus = [r for r in records if r["timing"].startswith("corpus")]
    if corpus:
        corpus_table(corpus, also, args.markdown)
    for r in records:
        if r["pass"] != "true":
            print("FAIL: %s run %s plan %s" % (r["timing"], r["run"], r["plan"]))
        m = re.match(r"(.+)_(\d+)kib$", r["plan"])
        if not m or r["timing"].startswith("corpus"):
            continue
        key = (r["timing"], m.group(1), int(m.group(2)), int(r["step"]))
        rows[key][r["run"]] = float(r["measured_s"])
        rows[key]["pred"] = float(r["predicted_s"])
        rows[key]["plan"] = r["plan"]
    worst = collections.defaultdict(float)
    sep = " | " if args.markdown else "  "
    for timing in sorted({k[0] for k in rows}):
        runs = sorted({run for v in rows.values() for run in v if run not in ("pred", "plan")})
        head = ["collective", "S (MiB)"] + ["run %s (us)" % r for r in runs] + ["calibrated (us)", "error"]
        for n, _, _ in also:
            head += ["%s (us)" % n, "error"]
        print("\ntiming %s\n" % timing)
        print(("| " if args.markdown else "") + sep.join(head) + (" |" if args.markdown else ""))
        if args.markdown:
            print("|" + "---|" * len(head))
        for key in sorted(k for k in rows if k[0] == timing):
            v = rows[key]
            ms = [v[r] for r in runs if r in v]
            line = [key[1] + ("" if key[3] == 0 else " (step %d)" % key[3]), "%g" % (key[2] / 1024)]
            line += ["%.1f" % (v[r] * 1e6) if r in v else "-" for r in runs]
            err = max((v["pred"] / m - 1 for m in ms), key=abs)
            worst[(timing, "calibrated", key[1])] = max(worst[(timing, "calibrated", key[1])], abs(err))
            line += ["%.1f" % (v["pred"] * 1e6), "%+.0f%%" % (100 * err)]
            for n, preds, _ in also:
                if v["plan"] not in preds:
                    line += ["-", "-"]
                    continue
                p = preds[v["plan"]][key[3]]
                e = max((p / m - 1 for m in ms), key=abs)
                worst[(timing, n, key[1])] = max(worst[(timing, n, key[1])], abs(e))
                line += ["%.1f" % (p * 1e6), "%+.0f%%" % (100 * e)]
            print(("| " if args.markdown else "") + sep.join(line) + (" |" if args.markdown else ""))
    print("\nlargest |error| at 1 MiB or more, over runs:")
    for (timing, n, typ), e in sorted(worst.items()):
        print("  %-7s %-11s %-15s %3.0f%%" % (timing, n, typ, 100 * e))


if __name__ == "__main__":
    main()
