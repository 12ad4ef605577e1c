"""The app's runtime: session state and the pickers, jobs, stored runs, who may use the app
(token, data roots) and how it is served."""
