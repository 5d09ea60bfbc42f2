# PRIV: every capability set empty, NoNewPrivs 1, Seccomp 2 (filter), in the runner, in a
# thread and in a subprocess (the state is inherited, not just set once).
import threading

WANT = {"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}


def status(path):
    fields = dict(l.split(":\t", 1) for l in open(path).read().splitlines() if ":\t" in l)
    return {k: fields.get(k, "").strip() for k in list(WANT) + ["Seccomp_filters"]}


seen = {"runner": status("/proc/self/status")}
t = threading.Thread(target=lambda: seen.update(thread=status("/proc/thread-self/status")))
t.start()
t.join()
status_code, out = run_child("print(open('/proc/self/status').read())")
fields = dict(l.split(":\t", 1) for l in out.splitlines() if ":\t" in l)
seen["subprocess"] = {k: fields.get(k, "").strip() for k in WANT}
bad = ["%s %s=%s" % (who, k, v[k]) for who, v in seen.items() for k in WANT if v.get(k) != WANT[k]]
bad += ["%s Seccomp_filters=0" % who for who, v in seen.items() if v.get("Seccomp_filters") == "0"]
report("allowed" if bad else "denied", ", ".join(bad) or None, control=check("subprocess ran", status_code == 0))
