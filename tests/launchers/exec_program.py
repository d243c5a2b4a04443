# torch.distributed.launch without --use_env starts `python -u SCRIPT --local_rank=N ARGS...`
# and needs a Python SCRIPT. This one stands in for a user's script: it runs the program
# named first in ARGS with the option where the script would have seen it:
#   PROGRAM --local_rank=N REST...
import os
import sys

args = sys.argv[1:]
i = next((k for k, a in enumerate(args) if not a.startswith("--local")), None)
if i is None:
    sys.exit("exec_program.py: no program named after the --local_rank option")
program = args[i]
os.execv(program, [program] + args[:i] + args[i + 1:])
