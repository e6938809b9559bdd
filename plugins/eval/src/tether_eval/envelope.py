"""An envelope: the sandbox the conversation's processes run in (`tether.sandbox.Envelope`, shared by every exec family).

eval needs two things from it: whether it is up right now (it never boots one) and how to turn a
command line into one that runs inside it. The kernel talks to tether over ipc sockets in the run's
private directory (Deno over tcp: on 127.0.0.1 when the envelope shares the host's loopback, else
relayed); the envelope must share that directory and the paths of the root and the interpreter.
"""

from tether.sandbox import Envelope

__all__ = ["Envelope"]
