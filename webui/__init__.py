"""The web UI: watch decentralized denoising live (Flask + Flask-SocketIO, threading mode).

app.py (factory), routes.py (HTTP), events.py (Socket.IO), tail.py (Redis streams -> rooms),
cluster.py (heartbeats + queue depths), jobs.py (form validation, rate limit, submit),
payloads.py (what the browser receives), templates/ and static/ (plain JS and CSS, no build step).
Imports nothing from the workers' model code; the router never imports this package.
"""
