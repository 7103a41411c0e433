"""`privacy-ledger serve`: the review meeting in a browser (docs/how-to/review-meeting.md).

A Starlette app over the façade (`ledger.api.Ledger`): the pages format what it returns, the
decision forms call its lifecycle methods, so every figure and every refusal is the one the
command line gives. Who acts is decided in one place (people.py); the safeguards a public web
app needs (CSRF, headers, upload bounds, error pages) are in guard.py.
"""
