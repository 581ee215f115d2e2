#!/usr/bin/env python3
"""cpu-split.py ROUNDS 'NAME<TAB>ENV<TAB>COMMAND' ...: each command's wall time, CPU time
(user + system, from wait4's rusage) and minor page faults, in interleaved rounds (every
other round backwards), as medians. ENV is empty or VAR=VALUE[,VAR=VALUE]; COMMAND is split
on spaces. Children are started with posix_spawn, so none pays for a fork of Python.
Exit status 1 counts as a run (it is a verdict); any other stops the script.

  scripts/cpu-split.py 31 $'head\\t\\t./p2pcheck-old --version' $'new\\t\\t./p2pcheck --version'
"""
import os
import statistics
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    cmds = [arg.split('\t') for arg in sys.argv[2:]]
    if any(len(c) != 3 for c in cmds):
        sys.exit('each command is NAME<TAB>ENV<TAB>COMMAND')
    runs = {c[0]: [] for c in cmds}
    devnull = os.open(os.devnull, os.O_WRONLY)
    for r in range(rounds):
        for name, env, command in (cmds if r % 2 == 0 else cmds[::-1]):
            argv = command.split(' ')
            e = dict(os.environ)
            for kv in filter(None, env.split(',')):
                k, v = kv.split('=', 1)
                e[k] = v
            start = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, e, file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
            _, status, ru = os.wait4(pid, 0)
            wall = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) not in (0, 1):
                sys.exit(f'{name}: exit status {os.waitstatus_to_exitcode(status)}')
            runs[name].append((wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3, ru.ru_utime * 1e3, ru.ru_minflt))
    for name, _, _ in cmds:
        med = [statistics.median(x[i] for x in runs[name]) for i in range(4)]
        print(f'  {name:34s} wall {med[0]:7.2f} ms  CPU {med[1]:7.2f} ms (user {med[2]:6.2f})  minflt {med[3]:6.0f}')


if __name__ == '__main__':
    main()
