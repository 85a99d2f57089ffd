"""Mechanisms the server drives beyond one request/response (DESIGN.md "Layout as it grows"):
server→client requests and the table of their pending answers."""
