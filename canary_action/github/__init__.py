"""The GitHub side: action inputs, the event context, baseline fetch, comment and check publishing."""
