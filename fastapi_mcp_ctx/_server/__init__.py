"""Messages to handlers: the HTTP exchange of both eras (DESIGN.md "Layout as it grows")."""
