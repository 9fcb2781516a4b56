"""What Loci knows about each provider API, one module per API shape, each reading and
writing requests, answers and streams over the turn of ``apis.turn``:

- ``chat``: OpenAI's Chat Completions;
- ``anthropic`` and ``anthropic_stream``: Anthropic's Messages;
- ``responses``: OpenAI's Responses;
- ``media``: images, documents and audio in each API's shape; ``wire``: reading
  payloads as they come (text, usage); ``client``: what a library caller hands in.
"""
