"""How the app's pages draw what an analysis returns: one module per page family, and the
widgets they share (nothing computed here)."""
