"""What a run shows while it trains: ``progress_log`` (pure formatting of its lines, text
or JSON), ``progress_meter`` (tokens/s, MFU, ETA; the clock is an argument), ``mfu`` (peak
FLOP/s table), ``console`` (printing, quiet or not), ``tracker`` (optional W&B) and
``sweep_context`` (a run's sweep, block and axes, for W&B).

Imports no other folder of ``scalelab.train``. Re-exports nothing.
"""
