# KRN: kernel addresses (defeat KASLR): /proc/kallsyms, /proc/modules, /sys/kernel/notes,
# /boot. Absent, or present with every address zero.
import glob


def addresses():
    found = []
    for path in ("/proc/kallsyms", "/proc/modules"):
        try:
            text = open(path).read(1 << 20)
        except OSError:
            continue
        for line in text.splitlines()[:2000]:
            for word in line.split():
                if word.startswith("0x"):
                    word = word[2:]
                if len(word) == 16 and word.strip("0123456789abcdef") == "" and word.strip("0"):
                    found.append(path)
                    break
            if found:
                break
    return found


leaks = addresses() + glob.glob("/boot/System.map*") + glob.glob("/sys/kernel/notes")
absent = not os.path.exists("/proc/kallsyms")
report("allowed" if leaks else "denied", ", ".join(leaks) or ("ENOENT" if absent else "ZEROED"),
       control=control_tmp_file())
