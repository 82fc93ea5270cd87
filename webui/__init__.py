"""The web UI: watch decentralized denoising live (Flask + Flask-SocketIO; gevent under gunicorn).

app.py (factory), config.py (settings), routes.py (HTTP) and body.py (its JSON bodies), events.py
(Socket.IO), tail.py (Redis streams -> rooms: one reader for every watched job), replay.py (catching
viewers up), viewers.py (their state), watch_gate.py (who may watch, how much), backlog.py (what each
connection has not taken), sio_guard.py (malformed Socket.IO packets), redis_pool.py (the one bounded
pool), cluster.py (heartbeats + queue depths), jobs.py (form validation, rate limit, submit),
payloads.py (what the browser receives), access.py (DDM_UI_TOKEN: the one check, and wrong tokens per
address), connection_cap.py (Socket.IO connections per address), idle.py (dropping idle ones),
eio_hooks.py (our code on Engine.IO's session events), server_model.py (threading or gevent),
gunicorn_conf.py (the production server), templates/ and static/ (CSS and native ES modules: app.js and
weights.js import static/js/, one job a module; no build step).
Imports nothing from the workers' model code; the router never imports this package.
"""
