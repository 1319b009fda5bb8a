# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 7's exercises (notebooks/07_decoding.ipynb)."""

from __future__ import annotations

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _trying, _unlike, _unpredictable


@_exercise("7.1", "the length penalty")
def _(length_penalty):
    draw = _unpredictable()  # and a length and an alpha drawn afresh
    for length in (1, 5, 12, 40, draw.randint(2, 200)):
        for alpha in (0.0, 0.6, 1.0, round(draw.uniform(0.1, 2.0), 3)):
            want, got = ((5 + length) / 6) ** alpha, float(length_penalty(length, alpha))
            if abs(got - want) <= 1e-9 * want:
                continue
            if abs(got - length**alpha) <= 1e-9 * max(length**alpha, 1):
                raise Wrong(f"length ** alpha is a plain power of the length; the book's penalty is ((5 + length) / 6) "
                            f"** alpha, which is 1 for a one-token hypothesis (length {length}, alpha {alpha}: "
                            f"{want:.4f}, got {got:.4f})")
            raise Wrong(f"for length {length} and alpha {alpha} the penalty is {want:.4f}, got {got:.4f}")
    short, long = -4.0 / length_penalty(5, 0.6), -4.6 / length_penalty(9, 0.6)
    winner = "the 9-token one wins" if long > short else "the 5-token one still wins"
    return (f"With alpha 0.6 the 5-token hypothesis scores {short:.3f} and the 9-token one {long:.3f}: {winner}; with "
            "alpha 0 the penalty is 1, the log-probabilities decide (-4.0 against -4.6), and the 5-token one wins.")


# (beams, vocabulary, k, the beam far ahead, seed): several shapes and k, so that none written in passes
_BEAM_CASES = ((3, 7, 3, 1, 0), (4, 11, 5, 2, 1), (5, 3, 4, 4, 2))


@_exercise("7.2", "the next beams")
def _(top_k_beams):
    draw = _unpredictable()  # and a case drawn afresh: its shape, k, the beam ahead and the scores' seed
    n_beams, vocab = draw.randint(1, 6), draw.randint(2, 20)
    drawn = (n_beams, vocab, draw.randint(1, min(n_beams * vocab, 8)), draw.randrange(n_beams), draw.randrange(10**6))
    for n_beams, vocab, k, ahead, seed in _BEAM_CASES + (drawn,):
        g = torch.Generator().manual_seed(seed)
        scores = torch.randn(n_beams, vocab, generator=g, dtype=torch.float64)
        scores[ahead] += 3.0  # one beam far ahead: several of the best continuations come from it
        case = f"for scores of shape ({n_beams}, {vocab}) and k={k}"
        _trying(case)
        out = top_k_beams(scores.clone(), k)
        if not isinstance(out, tuple) or len(out) != 3:
            raise Wrong("top_k_beams(scores, k) should return three tensors: beams, tokens and their scores")
        beams, tokens, best = (torch.as_tensor(t) for t in out)
        want_best, flat = scores.flatten().topk(k)
        want_beams, want_tokens = flat // vocab, flat % vocab
        if beams.shape != (k,) or tokens.shape != (k,):
            raise Wrong(f"{case}, beams and tokens should each hold k={k} entries, got shapes {tuple(beams.shape)} "
                        f"and {tuple(tokens.shape)}")
        beams, tokens = beams.long(), tokens.long()
        if not (torch.equal(beams, want_beams) and torch.equal(tokens, want_tokens)):
            if any(torch.equal(beams, flat % d) and torch.equal(tokens, flat // d) for d in (vocab, n_beams)):
                raise Wrong(f"you took the top k over beams x vocabulary, then swapped // and %: in scores.flatten() "
                            f"of a ({n_beams}, {vocab}) tensor, index i is beam i // {vocab} (the row) and token "
                            f"i % {vocab} (the column)")
            if torch.equal(beams, flat // n_beams) and torch.equal(tokens, flat % n_beams):
                raise Wrong(f"a row of scores holds one beam's {vocab} tokens: in scores.flatten() index i is beam "
                            f"i // {vocab} and token i % {vocab}; divide by the vocabulary size ({vocab}), not the "
                            f"number of beams ({n_beams})")
            divisor = next((d for d in range(1, scores.numel() + 1)
                            if torch.equal(beams, flat // d) and torch.equal(tokens, flat % d)), None)
            if divisor is not None:
                raise Wrong(f"{case}, index i of scores.flatten() is beam i // {vocab} and token i % {vocab}; you "
                            f"divided by {divisor}: take the vocabulary size from scores.size(1)")
            took_top_k = best.shape == (k,) and torch.allclose(best.double(), want_best)
            if not took_top_k and len(set(beams.tolist())) == k and len(set(want_beams.tolist())) < k:
                raise Wrong(f"the {k} best continuations need not come from {k} different beams: here beam {ahead} "
                            f"gives {want_beams.tolist().count(ahead)} of them; take the top k over beams x "
                            "vocabulary at once")
            raise Wrong(f"{case} expected beams {want_beams.tolist()} and tokens {want_tokens.tolist()}, got "
                        f"{beams.tolist()} and {tokens.tolist()} (best first)")
        if not torch.allclose(best.double(), want_best):
            raise Wrong(f"{case} the scores should be {[round(v, 4) for v in want_best.tolist()]}, got "
                        f"{best.tolist()}")
    return "It is what beam_search does at each step, for one sentence."


def _toy_step(prefix: list[int]) -> torch.Tensor:
    """A fixed 'model': the next token depends on the last token and on the prefix length."""
    vocab = 6
    logits = torch.zeros(vocab, dtype=torch.float64)
    last = prefix[-1]
    logits[(last * 2 + len(prefix)) % 4 + 2] = 5.0  # tokens 2..5
    if len(prefix) == 5:
        logits[1] = 9.0  # </s> after four generated tokens
    return logits.log_softmax(-1)


@_exercise("7.3", "greedy decoding")
def _(greedy_search):
    # the toy model with its own ids, then with them relabelled (start 3, end 0), then relabelled and cut at a length
    # drawn afresh, so that no id or length written in passes
    draw = _unpredictable()
    drawn = _unlike(lambda: draw.sample(range(6), 6), ([0, 1], [3, 0]), key=lambda ids: ids[:2])  # start, end
    for relabel, lengths in (([0, 1, 2, 3, 4, 5], (10, 3)), ([3, 0, 5, 1, 4, 2], (10, 3)),
                             (drawn, (draw.randint(1, 12),))):
        back = {new: old for old, new in enumerate(relabel)}
        bos, eos = relabel[0], relabel[1]

        def step(prefix, relabel=relabel, back=back, bos=bos):
            if not isinstance(prefix, (list, tuple)) or not prefix or prefix[0] != bos:
                raise Wrong(f"step takes the whole prefix, starting with the start symbol {bos}, got {prefix!r}")
            logits = _toy_step([back[int(t)] for t in prefix])
            return logits[torch.tensor([back[t] for t in range(len(relabel))])]

        for max_len in lengths:
            _trying(f"greedy_search(step, {bos}, {eos}, {max_len})")
            want, prefix = [], [bos]
            while len(want) < max_len:
                token = int(step(prefix).argmax())
                want.append(token)
                prefix.append(token)
                if token == eos:
                    break
            got = [int(t) for t in greedy_search(step, bos, eos, max_len)]
            if got == want:
                continue
            if got[:len(want)] == want and len(got) > len(want):
                raise Wrong(f"with max_len={max_len} decoding stops once it has produced the end symbol: expected "
                            f"{want}, got {got}")
            raise Wrong(f"with bos={bos}, eos={eos} and max_len={max_len} expected {want} (the tokens after the start "
                        f"symbol, the end symbol included), got {got}")
    return "The loop every decoder runs: feed the prefix, take the most probable token, stop at </s> or max_len."


@_exercise("7.4", "what the cache saves")
def _(decoder_positions):
    for n in (1, 2, 10, 100, _unpredictable().randint(3, 5000)):
        for cached in (False, True):
            want = n if cached else n * (n + 1) // 2
            got = decoder_positions(n, cached)
            if got != want:
                how = "with the cache each step runs the new position only" if cached else \
                    "without a cache step t runs the decoder over all t positions of the prefix"
                tokens = "token" if n == 1 else "tokens"
                runs = "position" if want == 1 else "positions"
                raise Wrong(f"to generate {n} {tokens} {'with' if cached else 'without'} the cache the decoder runs "
                            f"{want:,} {runs} ({how}), got {got}")
    return "For 100 tokens: 5,050 positions without the cache, 100 with it; the saving grows with the length."
