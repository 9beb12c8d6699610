#!/usr/bin/env python3
"""Interleaved timing of whole commands, for comparing two builds.

    python3 benches/ab.py ROUNDS 'CMD A' 'CMD B' ...

Runs each command once to warm up, then ROUNDS rounds of all of them in
turn (the order reversed every other round, so a slow patch of the
machine hits each alike), output to /dev/null. Prints for each command
the median wall time with its quartiles, and the median CPU time (user +
system, its children included, from wait4).
"""
import os, sys, time, statistics, shlex, subprocess
rounds = int(sys.argv[1]); cmds = [shlex.split(c) for c in sys.argv[2:]]
wall = [[] for _ in cmds]; cpu = [[] for _ in cmds]
devnull = os.open(os.devnull, os.O_WRONLY)
for c in cmds:  # warm-up
    subprocess.run(c, stdout=devnull, stderr=devnull)
for r in range(rounds):
    order = list(range(len(cmds)))
    if r % 2: order.reverse()
    for i in order:
        t = time.perf_counter_ns()
        pid = os.posix_spawnp(cmds[i][0], cmds[i], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, _, ru = os.wait4(pid, 0)
        wall[i].append((time.perf_counter_ns() - t) / 1e6)
        cpu[i].append((ru.ru_utime + ru.ru_stime) * 1e3)
for c, w, u in zip(sys.argv[2:], wall, cpu):
    q = statistics.quantiles(w, n=4)
    print(f"wall {statistics.median(w):6.2f} ms (q1 {q[0]:5.2f} q3 {q[2]:5.2f})  cpu {statistics.median(u):5.2f} ms  {c}")
