"""The decode loop and the events it yields."""
