"""The captures walker_diff and query_diff compare decoders on (one list, so both tests cover the
same trace): pt-synth random walks over corpus binaries in every timing mode, with and without
return compression, with small PSB periods and two threads; and pt-emulate recordings of corpus
programs (signals, exceptions, threads, dlopen)."""
import os
import subprocess

SYNTH_VARIANTS = {
    "cyc": ["--psb-period", "512"],
    "noretcomp": ["--psb-period", "512", "--no-retcomp"],
    "mtc-2threads": ["--psb-period", "1024", "--timing", "mtc", "--threads", "2"],
    "tsc": ["--psb-period", "256", "--timing", "tsc"],
    "none": ["--psb-period", "4096", "--timing", "none"],
}
EMULATE_VARIANTS = {
    "signal-mtc": ("signal", ["--timing", "mtc"]),
    "exceptions": ("exceptions", []),
    "threads-noretcomp": ("threads", ["--no-retcomp"]),
    "dlopen-psb256": ("dlopen", ["--psb-period", "256"]),
}


def synth_captures(synth, binaries, work, problems):
    """Yields (name, archive) for every SYNTH_VARIANT of every binary; a failed pt-synth run is
    added to `problems`."""
    for binary in binaries:
        for name, extra in SYNTH_VARIANTS.items():
            archive = os.path.join(work, f"{os.path.basename(binary)}-{name}.ptar")
            made = subprocess.run([synth, "-o", archive, "--binary", binary,
                                   "--instructions", "300000", "--seed", "7"] + extra,
                                  capture_output=True, text=True)
            if made.returncode != 0:
                problems.append(f"pt-synth {name}: {made.stderr.strip()}")
                continue
            yield os.path.basename(archive), archive


def emulate_captures(emulate, programs, work, problems):
    """Yields (name, archive) for every EMULATE_VARIANT (programs: the corpus programs' directory);
    a failed pt-emulate run is added to `problems`."""
    for name, (program, extra) in EMULATE_VARIANTS.items():
        archive = os.path.join(work, f"emulate-{name}.ptar")
        made = subprocess.run([emulate, "--full", "-o", archive] + extra +
                              ["--", os.path.join(programs, "corpus-" + program)],
                              capture_output=True, text=True, timeout=600)
        if made.returncode != 0:
            problems.append(f"pt-emulate {name}: {made.stderr.strip()}")
            continue
        yield name, archive
